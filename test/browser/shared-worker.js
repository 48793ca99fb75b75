// Web Worker side of test/browser-shared.test.ts: attaches to the page's
// manager, holds its lock for ~300 ms (telling the page when it has it),
// then takes two ids and reports what it saw.
import { ConcurrentBlockManagerImpl } from '/dist/index.js';

onmessage = (e) => {
  const m = ConcurrentBlockManagerImpl.attach(e.data);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  m.withLock(() => {
    postMessage({ threadId: m.threadId, usedSeen: m.numUsedBlocks(), depth: m.lockDepth() });
    Atomics.wait(pause, 0, 0, 300); // waiting is allowed in a worker
  });
  const ids = [...m.allocate(2)];
  postMessage({ ids, threadId: m.threadId });
};
