// npm run bench: the Wasm core against the reference model, side by side in
// one run (medians; the machine is shared and noisy, so read the ratios).
//
//   npm run bench                 everything (the model's full-trace replay takes minutes)
//   npm run bench -- --quick      micro-benchmarks and the core's replays only
//   npm run bench -- --micro      micro-benchmarks only

import { Bench } from 'tinybench';
import '../bindings/wasm-node.js';
import { plainCore } from '../bindings/core/plain-core.js';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { runReplay } from '../bindings/replay/stepper.js';
import { replaySync } from '../bindings/replay/replay.js';
import { ModelBlockManager } from '../model/block-manager-impl.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import { ModelReplayTarget } from '../model/replay-target.js';
import { modesAgainstPlain } from './modes.js';
import { phase, progress } from './progress.js';

const quick = process.argv.includes('--quick');
const N = 65536;
const B = 16;
const TRACE = process.env['KVPOOL_TRACE'] ?? 'mooncake-conversation';

type Manager = BlockManagerImpl | ModelBlockManager;
type Ids = Int32Array | number[];

/** A chain of `blocks` full blocks whose tokens start at `base`. */
function chain(blocks: number, base: number): number[] {
  return Array.from({ length: blocks * B }, (_, i) => base + i);
}

/**
 * Each task repeats its operation REPS times per timed call: single
 * operations take less time than the timer's own resolution and overhead.
 */
const REPS = 64;
const reps = new Map<string, number>();

function microTasks(name: 'core' | 'model', make: () => Manager, bench: Bench): void {
  const m = make();
  // Matching gets a manager of its own: the insert and evict tasks evict the
  // oldest entries, and tinybench's warm-up runs every task before timing
  // any, so on a shared manager the "full hit" chain was evicted and the
  // task timed a miss at the first block.
  const mm = make();
  // Each side gets the array type it works with natively: Int32Array for the
  // core (what a runtime passes), plain arrays for the model.
  const arr = (a: number[]): Ids => (name === 'core' ? Int32Array.from(a) : a);
  const alloc = (n: number, on = m): Ids => (on.allocate(n) ?? []) as Ids;
  const dealloc = (x: Ids, on = m) => (on as BlockManagerImpl).deallocate(x);
  const cacheOf = (t: Ids, x: Ids, on = m) => (on as BlockManagerImpl).cache(t, x);
  const shared = (t: Ids) => (mm as BlockManagerImpl).allocateShared(t) as Ids;
  let salt = 1_000_000;
  const add = (what: string, fn: () => void, r: number, hooks?: Parameters<Bench['add']>[2]) => {
    reps.set(`${name}: ${what}`, r);
    bench.add(`${name}: ${what}`, fn, hooks);
  };
  add('allocate + deallocate 1 id', () => {
    for (let i = 0; i < REPS; i++) dealloc(alloc(1));
  }, REPS);
  add('allocate + deallocate 64 ids', () => {
    for (let i = 0; i < REPS; i++) dealloc(alloc(64));
  }, REPS);
  // A cached 64-block chain to match.
  const hot = arr(chain(64, 0));
  const held = alloc(64, mm);
  cacheOf(hot, held, mm);
  dealloc(held, mm);
  add('match 64-block chain, full hit', () => {
    const hits = shared(hot);
    if (hits.length !== 64) throw new Error(`${name}: the full-hit chain matched ${hits.length} blocks, not 64`);
    dealloc(hits, mm);
  }, 1);
  const cold = arr(chain(64, 50_000_000));
  add('match 64-block chain, miss at once', () => {
    for (let i = 0; i < 16; i++) shared(cold);
  }, 16);
  let t: Ids = [];
  let own: Ids = [];
  add(
    'insert 64-block chain',
    () => {
      cacheOf(t, own);
    },
    1,
    {
      beforeEach: () => {
        t = arr(chain(64, (salt += 64 * B)));
        own = alloc(64);
      },
      afterEach: () => {
        dealloc(own);
        m.evict(64);
      },
    },
  );
  add(
    'evict 64 blocks',
    () => {
      m.evict(64);
    },
    1,
    {
      beforeEach: () => {
        const x = alloc(64);
        cacheOf(arr(chain(64, (salt += 64 * B))), x);
        dealloc(x);
      },
    },
  );
}

function median(task: { name: string; result: unknown }): number {
  const r = task.result as { state: string; latency?: { p50: number } };
  return r.latency ? (r.latency.p50 * 1e6) / (reps.get(task.name) ?? 1) : NaN; // ns per operation
}

async function micro(): Promise<void> {
  const bench = new Bench({ time: quick ? 300 : 1000, warmup: true });
  microTasks('core', () => new BlockManagerImpl({ numBlocks: N, blockSize: B }), bench);
  microTasks('model', () => new ModelBlockManager({ numBlocks: N, blockSize: B }), bench);

  // Decode step: allocate(seq, n) with and without a new block.
  const pool = new BlockManagerPool({ numBlocks: N, blockSize: B });
  const seq = new Sequence(chain(4, 7_000_000));
  pool.allocate(seq);
  seq.kvCachedTokens = seq.numTokens;
  reps.set('core: decode step, no new block', REPS);
  bench.add('core: decode step, no new block', () => {
    for (let i = 0; i < REPS; i++) pool.allocate(seq, seq.numTokens);
  });
  const model = new ModelBlockManagerPool({ numBlocks: N, blockSize: B });
  const mseq = model.newSequence(chain(4, 7_000_000));
  model.allocate(mseq);
  reps.set('model: decode step, no new block', REPS);
  bench.add('model: decode step, no new block', () => {
    for (let i = 0; i < REPS; i++) model.allocate(mseq, mseq.numTokens);
  });
  let grow = new Sequence([1]);
  bench.add(
    'core: decode step, one new block',
    () => {
      pool.allocate(grow, B + 1);
    },
    {
      beforeEach: () => {
        grow = new Sequence(chain(1, 9_000_000).concat([5]));
        pool.allocate(grow, B);
      },
      afterEach: () => pool.deallocateWithoutCache(grow),
    },
  );
  let mgrow = model.newSequence([1]);
  bench.add(
    'model: decode step, one new block',
    () => {
      model.allocate(mgrow, B + 1);
    },
    {
      beforeEach: () => {
        mgrow = model.newSequence(chain(1, 9_000_000).concat([5]));
        model.allocate(mgrow, B);
      },
      afterEach: () => model.deallocate(mgrow, false),
    },
  );

  const mib = new Int32Array(262144).map((_, i) => i * 2654435761);
  bench.add('core: hashBlocks 1 MiB of tokens (B=16)', () => {
    hashBlocks(mib, B);
  });
  // Measured on the shared 2-core VM: tinybench first warms every task up
  // (about half the time, no task finished meanwhile), then times each.
  phase(`micro-benchmarks: ${bench.tasks.length} tasks`, quick ? '~1-1.5 min' : '~2-3 min');
  bench.addEventListener('warmup', () => phase('micro-benchmarks: warming every task up before timing any'));
  let bar = null as ReturnType<typeof progress> | null;
  let done = 0;
  bench.addEventListener('cycle', (e) => {
    bar ??= progress('micro, timed', bench.tasks.length);
    bar.update(++done, (e as unknown as { task?: { name: string } }).task?.name ?? '');
  });
  await bench.run();
  bar?.stop();

  const rows = new Map<string, { core?: number; model?: number }>();
  for (const task of bench.tasks) {
    const [who, what] = task.name.split(': ') as ['core' | 'model', string];
    const row = rows.get(what) ?? {};
    row[who] = median(task);
    rows.set(what, row);
  }
  console.log('\nPer-operation medians (ns) -- N = 65536 blocks, B = 16');
  console.log('| operation | core | model | model / core |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [what, r] of rows) {
    const ratio = r.core && r.model ? `${(r.model / r.core).toFixed(1)}x` : '';
    console.log(`| ${what} | ${r.core?.toFixed(0) ?? ''} | ${r.model?.toFixed(0) ?? ''} | ${ratio} |`);
  }
  const h = rows.get('hashBlocks 1 MiB of tokens (B=16)')!.core!;
  console.log(`\nhashBlocks throughput: ${(1048576 / h).toFixed(2)} GB/s (1 MiB in ${(h / 1000).toFixed(0)} us)`);
}

function memoryPerBlock(): void {
  const e = plainCore().ex;
  const before = e.heapTop();
  const m = new BlockManagerImpl({ numBlocks: N, blockSize: B });
  const kv = (e.heapTop() - before) / N;
  const before2 = e.heapTop();
  const s = new BlockManagerImpl({ numBlocks: N, blockSize: B, enablePrefixCache: false });
  const plain = (e.heapTop() - before2) / N;
  console.log(`\nCore memory per block: ${kv.toFixed(1)} bytes with the prefix cache, ${plain.toFixed(1)} without`);
  m.dispose();
  s.dispose();
}

async function replays(): Promise<void> {
  phase(`replays of ${TRACE}`, quick ? 'the core only, ~20 s' : 'the core, then the reference model: ~4 min in all');
  const trace = await readTraceFile(TRACE);
  const configs = [
    { label: 'defaults (65536 blocks)', numBlocks: 65536, publishAfterPrefill: false },
    { label: '16384 blocks, publish after prefill', numBlocks: 16384, publishAfterPrefill: true },
  ];
  console.log(`\nReplay of the Mooncake conversation trace (${trace.length} requests), loop time`);
  console.log('| configuration | implementation | seconds | allocate calls/s | hit rate | JS heap after (MB) |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: |');
  for (const c of configs) {
    const runs: number[] = [];
    let last;
    const bar = progress(`core, ${c.label}`, 3);
    for (let i = 0; i < 3; i++) {
      bar.update(i, `run ${i + 1} of 3`);
      last = replaySync({ trace, numBlocks: c.numBlocks, publishAfterPrefill: c.publishAfterPrefill });
      runs.push(last.seconds);
    }
    bar.update(3);
    bar.stop();
    runs.sort((a, b) => a - b);
    const heap = process.memoryUsage().heapUsed / 2 ** 20;
    console.log(`| ${c.label} | core (median of 3) | ${runs[1]!.toFixed(2)} | ${last!.allocateCallsPerSecond.toLocaleString('en-US')} | ${last!.hitRate} | ${heap.toFixed(0)} |`);
    if (!quick) {
      phase(`reference model, ${c.label}`, 'the slow side: ~1.5 min');
      const mbar = progress('model', trace.length);
      const model = runReplay(new ModelReplayTarget(new ModelBlockManagerPool({ numBlocks: c.numBlocks, blockSize: B })), trace, {
        blockSize: B,
        maxRunning: 32,
        publishAfterPrefill: c.publishAfterPrefill,
      }, (d) => mbar.update(d, 'requests'));
      mbar.stop();
      const mheap = process.memoryUsage().heapUsed / 2 ** 20;
      console.log(`| ${c.label} | model | ${model.seconds.toFixed(2)} | ${model.allocateCallsPerSecond.toLocaleString('en-US')} | ${model.hitRate} | ${mheap.toFixed(0)} |`);
      console.log(`|  | model / core | ${(model.seconds / runs[1]!).toFixed(1)}x |  |  |  |`);
    }
  }
  console.log(`Wasm linear memory: ${(plainCore().memory.buffer.byteLength / 2 ** 20).toFixed(1)} MB`);
  phase('every replay mode against the plain replay', 'the core only, ~20 s');
  modesAgainstPlain(trace, 5);
}

phase('npm run bench: the Wasm core against the reference model; tables on stdout, progress here');
await micro();
memoryPerBlock();
if (!process.argv.includes('--micro')) await replays();
