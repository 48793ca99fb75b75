// Web Worker side of test/browser-shared.test.ts: attaches to the page's
// manager and takes its lock; lets go once the lock word shows a waiter
// (the page spinning for it), then, after the page's allocation, takes two ids.
import { ConcurrentBlockManagerImpl } from '/dist/index.js';

const CONTENDED = 0x40000000; // the waiter bit of the lock word (bindings/managers/shared-lock.ts)
const HDR_LOCK = 8; // where the lock word sits in a manager's header (bindings/core/abi.ts)

onmessage = (e) => {
  const { desc, flags } = e.data;
  const m = ConcurrentBlockManagerImpl.attach(desc);
  const word = new Int32Array(desc.memory.buffer);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  let sawWaiter = false;
  m.withLock(() => {
    postMessage({ threadId: m.threadId, usedSeen: m.numUsedBlocks(), depth: m.lockDepth() });
    for (let i = 0; i < 20_000 && !sawWaiter; i++) {
      sawWaiter = (Atomics.load(word, (desc.ptr + HDR_LOCK) >>> 2) & CONTENDED) !== 0;
      Atomics.wait(nap, 0, 0, 1); // waiting is allowed in a worker
    }
  });
  while (Atomics.load(flags, 1) === 0) Atomics.wait(flags, 1, 0, 1000);
  const ids = [...m.allocate(2)];
  postMessage({ ids, threadId: m.threadId, sawWaiter });
};
