// Worker side of test/concurrent-manager.test.ts (run with `--import tsx`).
// Attaches to the manager described in workerData and, by `mode`:
// "hammer": waits for the start signal, runs hammer(), posts its tally;
// "die-holding": takes the lock, notes its thread id, and exits without letting go;
// "create-big": creates a manager large enough to grow the shared memory,
// takes 5 ids from it and posts its descriptor back.

import { parentPort, workerData } from 'node:worker_threads';
import '../../bindings/wasm-node.js';
import { ConcurrentBlockManagerImpl, type SharedManagerDescriptor } from '../../bindings/managers/concurrent-block-manager-impl.js';
import { hammer } from './concurrent-hammer.js';

interface Data {
  mode: 'hammer' | 'die-holding' | 'create-big';
  desc: SharedManagerDescriptor;
  ops: number;
  seed: number;
  tag: number;
  owners: SharedArrayBuffer;
  start: SharedArrayBuffer;
}

const d = workerData as Data;
const m = ConcurrentBlockManagerImpl.attach(d.desc);

if (d.mode === 'hammer') {
  const start = new Int32Array(d.start);
  parentPort!.postMessage({ ready: true, threadId: m.threadId });
  while (Atomics.load(start, 0) === 0) Atomics.wait(start, 0, 0);
  const tally = hammer(m, d.ops, d.seed, new Int32Array(d.owners), d.tag);
  parentPort!.postMessage({ tally, threadId: m.threadId });
} else if (d.mode === 'create-big') {
  const big = new ConcurrentBlockManagerImpl({ numBlocks: 100_000, blockSize: 4 });
  big.allocate(5);
  parentPort!.postMessage({ desc: big.share(), bytes: d.desc.memory.buffer.byteLength });
} else {
  m.withLock(() => {
    Atomics.store(new Int32Array(d.start), 1, m.threadId); // who holds it, for the test
    process.exit(3); // dies holding the lock: no finally runs
  });
}
