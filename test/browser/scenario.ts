// Calls on the public API whose results are compared between Node and
// Chromium (test/browser-core.test.ts). It gets the `kvpool` module as an
// argument so the same file runs against either platform's entry, and
// returns plain JSON.

import type * as Kvpool from '../../bindings/index.js';

type Api = typeof Kvpool;

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

function error(fn: () => unknown): string {
  try {
    fn();
    return 'no error';
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
}

export function scenario(kv: Api): unknown {
  const out: Record<string, unknown> = {};
  const bytes = new Uint8Array(300).map((_, i) => (i * 37 + 11) & 255);
  out['xxh3'] = [0, 1, 17, 129, 240, 241, 300].map((n) => hex(kv.xxh3_128(bytes.subarray(0, n), 1024)));
  out['xxh3Seed'] = hex(kv.xxh3_128(bytes, 0xffffffffffffffffn));
  const tokens = Int32Array.from({ length: 70 }, (_, i) => i * 1000 - 5);
  out['hashBlocks'] = hex(kv.hashBlocks(tokens, 16));

  const m = new kv.BlockManagerImpl({ numBlocks: 12, blockSize: 4 });
  const ids = m.allocate(5)!;
  const t = Array.from({ length: 18 }, (_, i) => 100 + i);
  out['manager'] = {
    ids: [...ids],
    inserted: m.cache(t, ids),
    states: [...m.blockStates()],
  };
  m.deallocate(ids);
  const shared = m.allocateShared(t);
  out['manager2'] = {
    shared: [...shared],
    more: [...(m.allocate(6) ?? [])],
    none: m.allocate(4) === null,
    evicted: m.evict(2),
    lru: [...m.lruOrder()],
    free: [...m.freeIds()],
    stats: m.stats(),
    states: [...m.blockStates()],
  };
  m.check();
  m.dispose();

  const pool = new kv.BlockManagerPool({ numBlocks: 40, blockSize: 4, dpSize: 2 });
  const a = new kv.Sequence(Array.from({ length: 23 }, (_, i) => i));
  const b = new kv.Sequence(Array.from({ length: 21 }, (_, i) => (i < 16 ? i : 500 + i)));
  const c = new kv.Sequence(Array.from({ length: 9 }, (_, i) => i));
  const steps: unknown[] = [];
  steps.push(pool.allocate(a), pool.allocate(b));
  a.kvCachedTokens = 23;
  pool.cache(a);
  pool.deallocate(a);
  steps.push(pool.allocate(c), c.sharedBlocks, [...c.blockTable], c.dpRank);
  const f = c.fork({ swapLastBlock: true });
  steps.push(pool.allocate(f), [...f.blockTable], pool.swapTransferInfos(c.dpRank));
  for (let i = 0; i < 9; i++) {
    b.appendToken(9000 + i);
    steps.push(pool.allocate(b, b.numTokens));
  }
  steps.push([...b.blockTable], [...b.slotIds(0, 30)]);
  pool.check();
  out['pool'] = {
    steps,
    free: pool.numFreeBlocks(),
    used: pool.numUsedBlocks(),
    cached: pool.numBlocksInPrefixCache(),
    utilization: pool.kvCacheUtilization(),
    stats: pool.stats(),
  };
  pool.deallocate([b, c, f]);
  pool.dispose();

  out['errors'] = [
    error(() => new kv.BlockManagerPool({ numBlocks: 1, blockSize: 4 })),
    error(() => new kv.Sequence([1, 2.5])),
    error(() => kv.hashBlocks([1, 2], 0)),
  ];

  const trace = kv.generateWorkload({ requests: 300, seed: 5 });
  const { seconds: _s, allocateCallsPerSecond: _a, ...replay } = kv.replaySync({ trace, numBlocks: 700, blockSize: 16, maxRunning: 12 });
  out['replay'] = replay;
  out['parseTrace'] = kv.parseTrace('{"input_length": 600, "output_length": 3, "hash_ids": [4, 9]}\n\n').map((r) => ({ ...r, hashIds: [...r.hashIds] }));
  return JSON.parse(JSON.stringify(out));
}
