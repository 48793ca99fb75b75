// Worker side of bench/concurrent.ts: attaches to the shared manager, waits
// for the start signal, runs the operation mix for `ms` and posts its count.

import { parentPort, workerData } from 'node:worker_threads';
import '../bindings/wasm-node.js';
import { ConcurrentBlockManagerImpl, type SharedManagerDescriptor } from '../bindings/managers/concurrent-block-manager-impl.js';
import { mix } from './concurrent-mix.js';

const d = workerData as { desc: SharedManagerDescriptor; start: SharedArrayBuffer; ms: number; salt: number };
const m = ConcurrentBlockManagerImpl.attach(d.desc);
const start = new Int32Array(d.start);
parentPort!.postMessage({ ready: true });
while (Atomics.load(start, 0) === 0) Atomics.wait(start, 0, 0);
parentPort!.postMessage({ ops: mix(m, d.ms, d.salt) });
