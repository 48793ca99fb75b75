// Worker side of test/concurrent-manager.test.ts (run with `--import tsx`).
// Attaches to the manager described in workerData and, by `mode`:
// "hammer": waits for the start signal, runs hammer(), posts its tally;
// "die-holding": takes the lock, notes its thread id, and exits without letting go;
// "create-big": creates a manager large enough to grow the shared memory,
// takes 5 ids from it and posts its descriptor back;
// "load-bytes": without attaching, loads the shared core from its bytes the
// way a browser page would (create(options, source)) and reports a few calls;
// "no-wait": tries the manager with Atomics.wait throwing, as on a browser's
// main thread, and reports the error;
// "attach-release": uses the attached manager, disposes it and releases the
// thread's regions of the shared memory;
// "history": runs runHistory() (test/concurrent-history.test.ts) and posts its log.

import { parentPort, workerData } from 'node:worker_threads';
import '../../bindings/wasm-node.js';
import { ConcurrentBlockManagerImpl, type SharedManagerDescriptor } from '../../bindings/managers/concurrent-block-manager-impl.js';
import { hammer } from './concurrent-hammer.js';
import { runHistory } from './concurrent-history.js';

interface Data {
  mode: 'hammer' | 'die-holding' | 'create-big' | 'load-bytes' | 'attach-release' | 'no-wait' | 'history';
  bytes?: Uint8Array;
  /** "load-bytes": the plain core's bytes, offered first (refused, and nothing kept). */
  plain?: Uint8Array;
  desc: SharedManagerDescriptor;
  ops: number;
  seed: number;
  tag: number;
  owners: SharedArrayBuffer;
  start: SharedArrayBuffer;
  /** "history": the shared counters, this thread's number, how many threads, phases and operations per phase. */
  sync?: SharedArrayBuffer;
  thread?: number;
  threads?: number;
  phases?: number;
  opsPerPhase?: number;
}

const d = workerData as Data;
const m = d.mode === 'load-bytes' ? null! : ConcurrentBlockManagerImpl.attach(d.desc);

if (d.mode === 'load-bytes') {
  let wrongCore = '';
  try {
    await ConcurrentBlockManagerImpl.ready(d.plain!);
  } catch (e) {
    wrongCore = `${(e as Error).name}: ${(e as Error).message}`;
  }
  const own = await ConcurrentBlockManagerImpl.create({ numBlocks: 6, blockSize: 2 }, d.bytes!);
  const a = own.allocate(2)!;
  own.cache([1, 2, 3, 4], a);
  own.deallocate(a);
  own.check();
  const hits = [...own.allocateShared([1, 2, 3, 4, 5])];
  const report = { hits, free: own.numFreeBlocks(), threadId: own.threadId, refused: '', wrongCore };
  try {
    ConcurrentBlockManagerImpl.releaseThread(); // a manager is still open
  } catch (e) {
    report.refused = (e as Error).message;
  }
  own.dispose();
  ConcurrentBlockManagerImpl.releaseThread();
  parentPort!.postMessage(report);
} else if (d.mode === 'history') {
  const log = runHistory(m, { sync: d.sync! }, d.thread!, d.threads!, d.phases!, d.opsPerPhase!, d.seed);
  parentPort!.postMessage({ log });
} else if (d.mode === 'hammer') {
  const start = new Int32Array(d.start);
  parentPort!.postMessage({ ready: true, threadId: m.threadId });
  while (Atomics.load(start, 0) === 0) Atomics.wait(start, 0, 0);
  const tally = hammer(m, d.ops, d.seed, new Int32Array(d.owners), d.tag, d.sync ? new Int32Array(d.sync) : undefined);
  parentPort!.postMessage({ tally, threadId: m.threadId });
} else if (d.mode === 'no-wait') {
  // As on a browser's main thread: Atomics.wait throws.
  let waitCalls = 0;
  Atomics.wait = () => {
    waitCalls++;
    throw new TypeError('Atomics.wait cannot be called in this context');
  };
  try {
    m.allocate(1);
    parentPort!.postMessage({ name: 'none' });
  } catch (e) {
    parentPort!.postMessage({ name: (e as Error).name, owner: (e as { ownerThreadId?: number }).ownerThreadId, waitCalls });
  }
} else if (d.mode === 'attach-release') {
  // Use the manager (staging areas get made), then leave the memory cleanly.
  const a = m.allocate(2)!;
  m.cache([9, 9, 8, 8], a);
  m.deallocate(m.allocateShared([9, 9, 8, 8]));
  m.deallocate(a);
  m.dispose();
  ConcurrentBlockManagerImpl.releaseThread();
  parentPort!.postMessage({ done: true });
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
