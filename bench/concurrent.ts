// npm run bench (second part): ConcurrentBlockManagerImpl.
//   1. the cost of the lock when nobody contends it, per operation, against
//      BlockManagerImpl (same calls, same state);
//   2. throughput of one shared manager driven by 1, 2 and 4 worker threads.
// Short on purpose (~15 s); the machine is shared, so read ratios, not digits.

import { Worker } from 'node:worker_threads';
import { Bench } from 'tinybench';
import '../bindings/wasm-node.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { B, mix, prompt } from './concurrent-mix.js';

const REPS = 64;
const N = 8192;

function uncontended(): void {
  const bench = new Bench({ time: 400, warmupTime: 100 });
  const sides: Array<[string, BlockManagerImpl]> = [
    ['BlockManagerImpl', new BlockManagerImpl({ numBlocks: N, blockSize: B })],
    ['ConcurrentBlockManagerImpl', new ConcurrentBlockManagerImpl({ numBlocks: N, blockSize: B })],
  ];
  for (const [name, m] of sides) {
    const t = prompt(1, 0);
    const ids = m.allocate(6)!;
    m.cache(t, ids);
    m.deallocate(ids);
    bench.add(`${name}: allocate + deallocate 1 id`, () => {
      for (let i = 0; i < REPS; i++) m.deallocate(m.allocate(1)!);
    });
    bench.add(`${name}: allocateShared 6 blocks + deallocate`, () => {
      for (let i = 0; i < REPS; i++) m.deallocate(m.allocateShared(t));
    });
    bench.add(`${name}: numFreeBlocks`, () => {
      for (let i = 0; i < REPS; i++) m.numFreeBlocks();
    });
  }
  bench.runSync();
  const ns = new Map<string, number>();
  for (const task of bench.tasks) {
    const r = task.result as { latency?: { p50?: number } } | undefined;
    ns.set(task.name, ((r?.latency?.p50 ?? NaN) * 1e6) / REPS);
  }
  console.log('\nUncontended lock overhead (median ns per iteration, one thread):');
  const rows: Record<string, { BlockManagerImpl: string; Concurrent: string; 'overhead per call': string }> = {};
  const calls: Record<string, number> = { 'allocate + deallocate 1 id': 2, 'allocateShared 6 blocks + deallocate': 2, numFreeBlocks: 1 };
  for (const [op, k] of Object.entries(calls)) {
    const a = ns.get(`BlockManagerImpl: ${op}`)!;
    const b = ns.get(`ConcurrentBlockManagerImpl: ${op}`)!;
    rows[op] = { BlockManagerImpl: a.toFixed(0), Concurrent: b.toFixed(0), 'overhead per call': `${((b - a) / k).toFixed(0)} ns` };
  }
  console.table(rows);
  for (const [, m] of sides) m.dispose();
}

async function throughput(threads: number, ms: number): Promise<number> {
  const m = new ConcurrentBlockManagerImpl({ numBlocks: N, blockSize: B });
  const desc = m.share();
  const start = new SharedArrayBuffer(4);
  const boot = new URL('../test/support/ts-worker.mjs', import.meta.url);
  const entry = new URL('./concurrent-worker.ts', import.meta.url).href;
  const workers = Array.from({ length: threads }, (_, i) => new Worker(boot, { workerData: { entry, desc, start, ms, salt: i + 1 } }));
  const first = (w: Worker) => new Promise<{ ops?: number }>((res, rej) => { w.once('message', res); w.once('error', rej); });
  try {
    await Promise.all(workers.map(first));
    const done = Promise.all(workers.map(first));
    Atomics.store(new Int32Array(start), 0, 1);
    Atomics.notify(new Int32Array(start), 0);
    const counts = await done;
    m.check();
    return counts.reduce((a, c) => a + (c.ops ?? 0), 0) / (ms / 1000);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
    m.dispose();
  }
}

uncontended();
const MS = 1500;
const plain = new BlockManagerImpl({ numBlocks: N, blockSize: B });
const base = mix(plain, MS, 1) / (MS / 1000);
plain.dispose();
const rows: Record<string, { 'ops/s': string; 'vs 1 thread': string }> = {
  'BlockManagerImpl, main thread (no lock)': { 'ops/s': base.toFixed(0), 'vs 1 thread': '' },
};
let one = 0;
for (const t of [1, 2, 4]) {
  const r = await throughput(t, MS);
  if (t === 1) one = r;
  rows[`Concurrent, ${t} worker thread${t > 1 ? 's' : ''}`] = { 'ops/s': r.toFixed(0), 'vs 1 thread': `${(r / one).toFixed(2)}x` };
}
console.log(`\nThroughput of one shared manager (mix of allocateShared/allocate/cache/deallocate, ${MS} ms each):`);
console.table(rows);
