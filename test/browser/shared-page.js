// Browser side of test/browser-shared.test.ts (served by the test, with the
// COOP/COEP headers that make the page cross-origin isolated). The main
// thread creates a ConcurrentBlockManagerImpl; a module Web Worker attaches
// to it and holds its lock until it sees the page waiting for it. The page's
// main thread, where Atomics.wait is not allowed, must get the lock by
// spinning. Results go back by POST.
import { ConcurrentBlockManagerImpl } from '/dist/index.js';

const report = (r) => fetch('/result', { method: 'POST', body: JSON.stringify(r) });

try {
  const m = await ConcurrentBlockManagerImpl.create({ numBlocks: 16, blockSize: 2 }, '/build/kvpool-shared.wasm');
  const mine = [...m.allocate(3)];
  const w = new Worker('/worker.js', { type: 'module' });
  const next = () => new Promise((res, rej) => {
    w.onmessage = (e) => res(e.data);
    w.onerror = (e) => rej(new Error(e.message));
  });
  const flags = new Int32Array(new SharedArrayBuffer(8));
  let msg = next();
  w.postMessage({ desc: m.share(), flags });
  const locked = await msg;
  msg = next();
  const waited = [...m.allocate(1)]; // the worker holds the lock: spin until it lets go
  Atomics.store(flags, 1, 1); // the worker allocates only after this
  Atomics.notify(flags, 1);
  const worker = await msg;
  m.check();
  report({ isolated: globalThis.crossOriginIsolated, mine, locked, waited, worker, used: m.numUsedBlocks() });
} catch (e) {
  report({ error: String((e && e.stack) || e) });
}
