// One fleet worker thread: a group of engines (bindings/fleet/engine-group.ts)
// answering the router's thread one call at a time.

import { parentPort, workerData } from 'node:worker_threads';
import '../wasm-node.js';
import { EngineGroup } from '../fleet/engine-group.js';
import type { VllmEncodeOptions } from '../events/vllm.js';
import type { FleetConfig } from '../fleet/fleet-options.js';
import type { ParsedReplayOptions } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';

export interface FleetWorkerData {
  replay: ParsedReplayOptions;
  indices: number[];
  events: boolean;
  trace: TraceRequest[];
  stepMs: number;
  /** The form of the event batches (default: map, uint64 hashes). */
  wire?: Omit<VllmEncodeOptions, 'ts'>;
}

export type FleetWorkerCall =
  | { type: 'tick'; t: number }
  | { type: 'step'; t: number; tick: boolean; assigned: number[] }
  | { type: 'run'; from: number; until: number }
  | { type: 'finish'; lastStep: number; config: FleetConfig };

const d = workerData as FleetWorkerData;
const port = parentPort!;
let group: EngineGroup;
try {
  group = new EngineGroup(d.replay, d.indices, d.events, d.trace, d.stepMs, d.wire);
} catch (e) {
  port.postMessage({ error: (e as Error).message });
  throw e;
}

port.on('message', (m: FleetWorkerCall) => {
  try {
    if (m.type === 'tick') port.postMessage(group.tick(m.t));
    else if (m.type === 'run') port.postMessage(group.runAhead(m.from, m.until < 0 ? Infinity : m.until));
    else if (m.type === 'step') {
      if (m.tick) group.tick(m.t);
      const reply = group.step(m.t, m.assigned);
      port.postMessage(reply, reply.events.flatMap(([, b]) => b.map((x) => x.buffer as ArrayBuffer)));
    } else {
      const reply = group.finish(m.lastStep, m.config);
      port.postMessage(reply);
      group.dispose();
    }
  } catch (e) {
    port.postMessage({ error: (e as Error).message });
  }
});
