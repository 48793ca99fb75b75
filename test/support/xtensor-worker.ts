// Worker side of test/xtensor-concurrent.test.ts. Attaches to the XTensor
// manager described in workerData and, by `mode`:
// "hammer": posts its thread id, waits for the start signal, runs hammer(),
// raises start[3] and posts its tally;
// "die-holding": takes the lock, notes its thread id, and exits without letting go;
// "after-dispose": posts that it is attached, waits for the signal (the
// creator disposed the manager meanwhile), then reports what a call and a
// fresh attach of the same descriptor throw;
// "look": reports what it sees of the manager, takes two ids and disposes its handle.

import { parentPort, workerData } from 'node:worker_threads';
import '../../bindings/wasm-node.js';
import {
  ConcurrentXTensorBlockManagerImpl, type SharedXTensorDescriptor,
} from '../../bindings/managers/xtensor-concurrent-block-manager-impl.js';
import { hammer } from './xtensor-hammer.js';

interface Data {
  mode: 'hammer' | 'die-holding' | 'after-dispose' | 'look';
  desc: SharedXTensorDescriptor;
  ops: number;
  seed: number;
  tag: number;
  owners: SharedArrayBuffer;
  start: SharedArrayBuffer;
}

const d = workerData as Data;
const m = ConcurrentXTensorBlockManagerImpl.attach(d.desc);
const start = new Int32Array(d.start);
const waitForStart = () => {
  while (Atomics.load(start, 0) === 0) Atomics.wait(start, 0, 0);
};
const message = (f: () => unknown): string => {
  try {
    f();
    return 'no error';
  } catch (e) {
    return (e as Error).message;
  }
};

if (d.mode === 'hammer') {
  parentPort!.postMessage({ ready: true, threadId: m.threadId });
  waitForStart();
  // start[2] counts the other thread's steps, if it counts them: what it had
  // done when this thread began and ended shows that the two overlapped.
  const stepsBefore = Atomics.load(start, 2);
  const tally = hammer(m, d.ops, d.seed, new Int32Array(d.owners), d.tag);
  const stepsAfter = Atomics.load(start, 2);
  m.dispose();
  Atomics.store(start, 3, 1); // done, for a thread that does not take messages meanwhile
  parentPort!.postMessage({ tally, stepsBefore, stepsAfter });
} else if (d.mode === 'die-holding') {
  m.withLock(() => {
    Atomics.store(start, 1, m.threadId); // who holds it, for the test
    process.exit(3); // dies holding the lock: no finally runs
  });
} else if (d.mode === 'after-dispose') {
  parentPort!.postMessage({ ready: true, used: m.numUsedBlocks() });
  waitForStart();
  parentPort!.postMessage({ call: message(() => m.allocate(1)), attach: message(() => ConcurrentXTensorBlockManagerImpl.attach(d.desc)) });
} else {
  const seen = {
    threadId: m.threadId,
    shape: [m.numBlocks, m.blockSize, m.pageSize, m.blockBytes, m.numLayers, m.dpRank, m.lockTimeoutMs],
    used: m.numUsedBlocks(),
    pages: m.pageStates(),
  };
  const ids = [...m.allocate(2)!];
  m.dispose();
  parentPort!.postMessage({ seen, ids, disposed: message(() => m.numFreeBlocks()) });
}
