// One sweep worker thread: replays the configurations it is sent (a replay,
// or a fleet of engines behind a router) over the trace it was started
// with, reporting progress as it goes.

import { parentPort, workerData } from 'node:worker_threads';
import '../wasm-node.js';
import './profile-files.js'; // profiles named by a string, read in this thread
import { fleetSync } from '../fleet/fleet.js';
import type { FleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { replaySync, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';

export type SweepJob =
  | { id: number; kind: 'replay'; options: ReplayOptions; traceName: string | undefined }
  | { id: number; kind: 'fleet'; options: FleetOptions; traceName: string | undefined; /** Keep the run's token times (stepEndMs, tokenSteps). */ tokenTimes: boolean };

export type SweepReply =
  | { type: 'progress'; id: number; done: number }
  | { type: 'result'; id: number; result: ReplayRun | FleetRun }
  | { type: 'error'; id: number; message: string; /** The error's class, so that the sweep rejects with the same one (a RangeError stays one). */ name: string };

/** The run without its token times unless they are wanted: they are most of a timed run's size, and a sweep holds every run. */
function lean(run: FleetRun, tokenTimes: boolean): FleetRun {
  const r = run.latency?.requests;
  if (tokenTimes || r === undefined) return run;
  return { ...run, latency: { ...run.latency!, requests: { ...r, stepEndMs: [], tokenSteps: [] } } };
}

const trace = (workerData as { trace: TraceRequest[] | null }).trace;
const port = parentPort!;

port.on('message', (job: SweepJob) => {
  const send = (m: SweepReply) => port.postMessage(m);
  try {
    const options = { ...job.options, ...(trace && { trace }), onProgress: (done: number) => send({ type: 'progress', id: job.id, done }) };
    const name = trace ? job.traceName : undefined;
    send({ type: 'result', id: job.id, result: job.kind === 'fleet' ? lean(fleetSync(options, name), job.tokenTimes) : replaySync(options, undefined, name) });
  } catch (e) {
    send({ type: 'error', id: job.id, message: (e as Error).message, name: e instanceof RangeError ? 'RangeError' : e instanceof TypeError ? 'TypeError' : 'Error' });
  }
});
