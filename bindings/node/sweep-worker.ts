// One sweep worker thread: replays the configurations it is sent over the
// trace it was started with, reporting progress as it goes.

import { parentPort, workerData } from 'node:worker_threads';
import '../wasm-node.js';
import { replaySync, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';

export interface SweepJob {
  id: number;
  options: ReplayOptions;
  traceName: string | undefined;
}

export type SweepReply =
  | { type: 'progress'; id: number; done: number }
  | { type: 'result'; id: number; result: ReplayRun }
  | { type: 'error'; id: number; message: string };

const trace = (workerData as { trace: TraceRequest[] | null }).trace;
const port = parentPort!;

port.on('message', (job: SweepJob) => {
  const send = (m: SweepReply) => port.postMessage(m);
  try {
    const options = { ...job.options, ...(trace && { trace }), onProgress: (done: number) => send({ type: 'progress', id: job.id, done }) };
    send({ type: 'result', id: job.id, result: replaySync(options, undefined, trace ? job.traceName : undefined) });
  } catch (e) {
    send({ type: 'error', id: job.id, message: (e as Error).message });
  }
});
