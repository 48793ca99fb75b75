// Exact victims of the non-LRU eviction policies (docs/eviction.md).

import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { main } from '../bindings/cli/main.js';
import { PoolReplayTarget, replaySync } from '../bindings/replay/replay.js';
import { parseRetention, retentionFrom, writeRetention } from '../bindings/managers/retention.js';
import { mulberry32 } from '../bindings/replay/prng.js';
import { capture } from './support/capture.js';
import { plainCore } from '../bindings/core/plain-core.js';

/** Caches `tokens` (block size 1) in fresh blocks and lets them go; returns the ids. */
function cacheAndRelease(m: BlockManagerImpl, tokens: number[]): number[] {
  const ids = [...m.allocate(tokens.length)!];
  m.cache(tokens, ids);
  m.deallocate(ids);
  return ids;
}

/** Matches `tokens` and lets the hits go (one hit each on the policy's count). */
function hit(m: BlockManagerImpl, tokens: number[]): number[] {
  const ids = [...m.allocateShared(tokens)];
  m.deallocate(ids);
  return ids;
}

describe('LFU eviction', () => {
  it('evicts the fewest hits first, least recent among equals, where LRU would take the oldest', () => {
    for (const policy of ['lru', 'lfu'] as const) {
      const m = new BlockManagerImpl({ numBlocks: 5, blockSize: 1, evictionPolicy: policy });
      expect(m.evictionPolicy).toBe(policy);
      const [a] = cacheAndRelease(m, [10]); // 1 hit (its insert)
      expect(hit(m, [10])).toEqual([a]);
      expect(hit(m, [10])).toEqual([a]); // 3
      const [b] = cacheAndRelease(m, [20]); // 1
      const [c] = cacheAndRelease(m, [30]); // 1, newer than b
      expect([a, b, c]).toEqual([1, 2, 3]);
      expect([...m.lruOrder()]).toEqual(policy === 'lru' ? [1, 2, 3] : [2, 3, 1]);
      expect(m.evict(1)).toBe(1);
      expect(m.isCachedId(policy === 'lru' ? 1 : 2)).toBe(false);
      expect(m.evict(2)).toBe(2);
      // The free stack shows the eviction order (pushed in turn).
      expect([...m.freeIds()].slice(-3)).toEqual(policy === 'lru' ? [1, 2, 3] : [2, 3, 1]);
      m.check();
      m.dispose();
    }
  });

  it('skips held entries and finds them again when released', () => {
    const m = new BlockManagerImpl({ numBlocks: 4, blockSize: 1, evictionPolicy: 'lfu' });
    cacheAndRelease(m, [10]); // id 1: 1
    cacheAndRelease(m, [20]); // id 2: 1
    hit(m, [20]); // id 2: 2
    const held = [...m.allocateShared([10])]; // id 1: 2, held
    expect(m.evict(1)).toBe(1); // id 1 is held: id 2 goes
    expect(m.isCachedId(2)).toBe(false);
    expect(m.evict(1)).toBe(0);
    m.deallocate(held);
    m.check();
    expect(m.evict(1)).toBe(1);
    expect(m.isCachedId(1)).toBe(false);
    m.check();
    m.dispose();
  });

  it('keeps a chain deepest first: a child never counts more hits than its parent in one batch', () => {
    const m = new BlockManagerImpl({ numBlocks: 6, blockSize: 1, evictionPolicy: 'lfu' });
    const seq = [...m.allocate(2)!]; // ids 1, 2
    m.cache([1, 2], seq);
    m.deallocate(seq);
    for (let i = 0; i < 3; i++) expect(hit(m, [1, 2])).toEqual([1, 2]); // 4 hits each
    // A sequence holds the chain; only the root is let go and evicted.
    const held = [...m.allocateShared([1, 2])]; // 5 each
    m.deallocate([held[0]!]);
    expect(m.evict(1)).toBe(1);
    expect(m.isCachedId(1)).toBe(false);
    // The root comes back in a new block (1 hit); the child's refresh is clamped to 1.
    const again = [...m.allocate(2)!];
    expect(m.cache([1, 2], again)).toBe(1);
    m.deallocate(again);
    m.deallocate([held[1]!]);
    const root = again[0]!;
    // Equal counts: the child (older) goes before its root, not after it.
    expect([...m.lruOrder()]).toEqual([2, root]);
    expect(m.evict(1)).toBe(1);
    expect(m.isCachedId(2)).toBe(false);
    expect(m.isCachedId(root)).toBe(true);
    m.check();
    m.dispose();
  });

  it('pools take the policy per rank', () => {
    const p = new BlockManagerPool({ numBlocks: 4, blockSize: 1, dpSize: 2, evictionPolicy: 'lfu' });
    expect(p.managers.map((m) => (m as BlockManagerImpl).evictionPolicy)).toEqual(['lfu', 'lfu']);
    const s = new Sequence([7, 8, 9]);
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = 3;
    p.deallocate(s);
    p.check();
    p.dispose();
    const d = new BlockManagerPool({ numBlocks: 4, blockSize: 1 });
    expect((d.managers[0] as BlockManagerImpl).evictionPolicy).toBe('lru');
    d.dispose();
  });

  it('rejects bad policies, naming the option', () => {
    expect(() => new BlockManagerImpl({ numBlocks: 4, blockSize: 1, evictionPolicy: 'mru' as never })).toThrow(
      new RangeError(`options.evictionPolicy must be one of 'lru', 'lfu', 'priority', got "mru"`),
    );
    expect(() => new BlockManagerImpl({ numBlocks: 4, blockSize: 1, evictionPolicy: 'mru' as never })).toThrow(RangeError); // a string naming no policy: a bad value
    expect(() => new BlockManagerImpl({ numBlocks: 4, blockSize: 1, enablePrefixCache: false, evictionPolicy: 'lfu' })).toThrow(RangeError);
    expect(() => new BlockManagerPool({ numBlocks: 4, blockSize: 1, evictionPolicy: 3 as never })).toThrow(TypeError);
    expect(() => new BlockManagerPool({ numBlocks: 4, blockSize: 1, enablePrefixCache: false, evictionPolicy: 'lfu' })).toThrow(RangeError);
    expect(() => replaySync({ requests: 1, slidingWindow: 64, eviction: 'lfu' })).toThrow(TypeError);
    expect(() => replaySync({ requests: 1, eviction: 'mru' as never })).toThrow(/options.eviction must be one of/);
  });

  it('replays the built-in workload with either policy (LRU unchanged by the option)', () => {
    const base = replaySync({ requests: 300, numBlocks: 512 });
    const lru = replaySync({ requests: 300, numBlocks: 512, eviction: 'lru' });
    const lfu = replaySync({ requests: 300, numBlocks: 512, eviction: 'lfu' });
    const pick = (r: typeof base) => [r.matchedBlocks, r.evictedBlocks, r.idChecksum];
    expect(pick(lru)).toEqual(pick(base));
    expect(lfu.promptBlocks).toBe(base.promptBlocks);
    expect(lfu.evictedBlocks).toBeGreaterThan(0);
    expect(pick(lfu)).not.toEqual(pick(base));
  });
});

describe('priority eviction with retention', () => {
  /** Caches single-block chains `t` (block size 1) with the given marks and lets them go. */
  function put(m: BlockManagerImpl, t: number[], retention?: { start?: number; end?: number; priority: number; duration?: number }[]): number[] {
    const ids = [...m.allocate(t.length)!];
    m.cache(t, ids, 0, retention);
    m.deallocate(ids);
    return ids;
  }

  it('evicts lower priorities first, least recent within one; an ended retention falls back to 35', () => {
    const m = new BlockManagerImpl({ numBlocks: 5, blockSize: 1, evictionPolicy: 'priority' });
    expect(m.evictionPolicy).toBe('priority');
    expect(put(m, [10], [{ priority: 80, duration: 10 }])).toEqual([1]);
    expect(put(m, [20])).toEqual([2]); // 35
    expect(put(m, [30], [{ priority: 10 }])).toEqual([3]); // 10 for ever
    expect([...m.lruOrder()]).toEqual([3, 2, 1]);
    m.setTime(9.5);
    expect([...m.lruOrder()]).toEqual([3, 2, 1]);
    m.setTime(10); // id 1's retention ends: 35, and it is older than id 2
    expect(m.time).toBe(10);
    expect([...m.lruOrder()]).toEqual([3, 1, 2]);
    m.check();
    expect(m.evict(2)).toBe(2);
    expect([...m.freeIds()].slice(-2)).toEqual([3, 1]);
    expect(m.isCachedId(2)).toBe(true);
    m.check();
    m.dispose();
  });

  it('a match keeps a block priority; a later insert that visits it sets it again', () => {
    const m = new BlockManagerImpl({ numBlocks: 4, blockSize: 1, evictionPolicy: 'priority' });
    put(m, [10], [{ priority: 90 }]); // id 1
    put(m, [20]); // id 2
    m.deallocate([...m.allocateShared([10])]); // recency only
    expect([...m.lruOrder()]).toEqual([2, 1]);
    const dup = [...m.allocate(1)!]; // id 3 duplicates [10]: the insert visits id 1 without marks
    m.cache([10], dup);
    m.deallocate(dup);
    expect([...m.lruOrder()]).toEqual([2, 1]); // both 35, id 1 the more recent
    put(m, [20], [{ priority: 0 }]); // visits id 2 again: 0
    expect([...m.lruOrder()]).toEqual([2, 1]);
    m.check();
    m.dispose();
  });

  it('keeps a chain deepest first within a priority, and honours higher marks on the root', () => {
    const m = new BlockManagerImpl({ numBlocks: 9, blockSize: 1, evictionPolicy: 'priority' });
    const flat = put(m, [1, 2, 3], [{ priority: 50 }]);
    expect([...m.lruOrder()]).toEqual([...flat].reverse());
    const sys = put(m, [7, 8, 9, 10], [{ start: 0, end: 2, priority: 90 }]); // a "system prompt" of 2 blocks
    expect([...m.lruOrder()]).toEqual([sys[3], sys[2], ...[...flat].reverse(), sys[1], sys[0]]);
    m.check();
    m.dispose();
  });

  it('marks a sequence in a pool; the pool clock ends retentions on every rank', () => {
    for (const policy of ['lru', 'priority'] as const) {
      const p = new BlockManagerPool({ numBlocks: 4, blockSize: 2, evictionPolicy: policy });
      const a = new Sequence([1, 1, 2, 2]);
      a.setRetention([{ end: 2, priority: 90, duration: 5 }]);
      expect(p.allocate(a)).toBe(true);
      const a0 = a.blockTable[0]!;
      a.kvCachedTokens = 4;
      p.deallocate(a);
      const b = new Sequence([5, 5]);
      expect(p.allocate(b)).toBe(true);
      b.kvCachedTokens = 2;
      p.deallocate(b);
      // Two blocks must go: LRU takes a's tail and root, priority a's tail and b.
      const c = new Sequence([7, 7, 8]);
      expect(p.allocate(c)).toBe(true);
      expect((p.managers[0] as BlockManagerImpl).isCachedId(a0)).toBe(policy === 'priority');
      p.deallocate(c);
      p.check();
      p.setTime(5);
      expect(p.time).toBe(5);
      // A beam child keeps its parent's marks.
      const d = new Sequence([3, 3, 4]);
      d.setRetention([{ priority: 70 }]);
      expect(p.allocate(d)).toBe(true);
      expect(d.fork().state.retention).toEqual([{ start: 0, end: Infinity, priority: 70, duration: Infinity }]);
      p.check();
      p.dispose();
    }
  });

  it('validates marks and the clock, changing nothing on a throw', () => {
    const s = new Sequence([1, 2, 3]);
    s.setRetention([{ priority: 20 }]);
    expect(() => s.setRetention([{ priority: 101 }])).toThrow(new RangeError('ranges[0].priority must be in [0, 100], got 101'));
    expect(() => s.setRetention('x' as never)).toThrow(new TypeError('ranges must be an array of ranges, got "x"'));
    expect(() => s.setRetention([{ priority: 1, duration: -1 }])).toThrow(new RangeError('ranges[0].duration must be >= 0, got -1'));
    expect(() => s.setRetention([{ priority: 1, duration: '5' as never }])).toThrow(new TypeError('ranges[0].duration must be a number, got "5"'));
    expect(() => s.setRetention([{ start: 0.5, priority: 1 }])).toThrow(/^ranges\[0\].start must be an integer/);
    expect(() => s.setRetention([{ start: 4, end: 2, priority: 1 }])).toThrow(/^ranges\[0\].end must be >= 5, got 2/);
    expect(() => s.setRetention([{ start: 4, end: 4, priority: 1 }])).toThrow(RangeError);
    expect(() => s.setRetention([{ priority: 1, until: 3 } as never])).toThrow(TypeError);
    expect(s.state.retention).toEqual([{ start: 0, end: Infinity, priority: 20, duration: Infinity }]);
    const m = new BlockManagerImpl({ numBlocks: 4, blockSize: 1, evictionPolicy: 'priority' });
    m.setTime(3);
    expect(() => m.setTime(2)).toThrow(new RangeError('t must be a finite time >= the current time 3, got 2'));
    expect(() => m.setTime('4' as never)).toThrow(new TypeError('t must be a number, got "4"'));
    expect(() => m.setTime(NaN)).toThrow(RangeError);
    expect(m.time).toBe(3);
    const ids = [...m.allocate(1)!];
    expect(() => m.cache([5], ids, 0, [{ priority: -1 }])).toThrow(RangeError);
    expect(m.numBlocksInPrefixCache()).toBe(0);
    // A rejected id stages nothing: the next insert gets the default (35), above a 10.
    expect(() => m.cache([5, 6], [ids[0]!, 3], 0, [{ priority: 0 }])).toThrow(RangeError);
    m.cache([5], ids);
    m.deallocate(ids);
    const [low] = put(m, [9], [{ priority: 10 }]);
    expect([...m.lruOrder()]).toEqual([low, ids[0]]);
    m.check();
    m.dispose();
  });
});

describe('writeRetention', () => {
  it('writes a range given twice as it writes it once', () => {
    const rand = mulberry32(19);
    const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
    for (let t = 0; t < 400; t++) {
      const B = int(1, 20);
      const start = int(0, 300);
      const end = rand() < 0.5 ? undefined : start + int(1, 200);
      const duration = rand() < 0.5 ? undefined : int(0, 50);
      const [r] = parseRetention('r', [{ start, end, priority: int(0, 100), duration }]);
      const first = int(0, 30);
      const n = int(0, 40);
      const now = int(0, 1000);
      const one = new Float64Array(2 * n + 4).fill(-1);
      const two = new Float64Array(2 * n + 4).fill(-1);
      writeRetention([r!], first, n, B, now, one, 2);
      writeRetention([r!, r!], first, n, B, now, two, 2);
      expect([...one], JSON.stringify({ r, first, n, B, now })).toEqual([...two]);
    }
  });

  it('a manager stages one range in the core as writeRetention writes it, ends at the int32 limit and counts past its blocks included', () => {
    const rand = mulberry32(23);
    const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
    const m = new BlockManagerImpl({ numBlocks: 48, blockSize: 4, enablePrefixCache: true, evictionPolicy: 'priority' });
    try {
      m.setTime(7);
      const rt = plainCore();
      const batch = rt.ex.mgr_batch_ptr(m.ptr) >>> 3;
      for (let t = 0; t < 400; t++) {
        const top = 2 ** 31 - 1;
        const start = rand() < 0.2 ? top - int(1, 9) : int(0, 250);
        const end = rand() < 0.4 ? undefined : rand() < 0.2 ? top : Math.min(top, start + int(1, 200));
        const duration = rand() < 0.5 ? undefined : int(0, 50);
        const [r] = parseRetention('r', [{ start, end, priority: int(0, 100), duration }]);
        const first = int(0, 60);
        const n = int(0, 70); // past the 48 batch positions at times
        const lim = Math.min(n, m.numBlocks);
        rt.ex.mgr_stage_retention(m.ptr, m.numBlocks, 0, 0, 99, 99); // every position at the default
        const f64 = new Float64Array(rt.i32.buffer);
        f64.fill(-1, batch + 2 * lim, batch + 2 * m.numBlocks); // positions past n stay as they are
        m.stageRetention([r!], first, n);
        const want = new Float64Array(2 * lim);
        writeRetention([r!], first, lim, 4, m.time, want, 0);
        const got = new Float64Array(rt.i32.buffer);
        const ctx = JSON.stringify({ r, first, n });
        expect([...got.subarray(batch, batch + 2 * lim)], ctx).toEqual([...want]);
        expect([...got.subarray(batch + 2 * lim, batch + 2 * m.numBlocks)], ctx).toEqual(Array(2 * (m.numBlocks - lim)).fill(-1));
      }
    } finally {
      m.dispose();
    }
  });

  it('retentionFrom gives what parseRetention makes of the same range', () => {
    expect(retentionFrom(37, 10)).toEqual(parseRetention('r', [{ start: 37, priority: 10 }]));
  });

  it('PoolReplayTarget refuses a decode priority out of 0..100 when made, not per request', () => {
    const pool = new BlockManagerPool({ numBlocks: 8, blockSize: 4, evictionPolicy: 'priority' });
    try {
      expect(() => new PoolReplayTarget(pool, 101)).toThrow(/^decodePriority must be in \[0, 100\], got 101/);
      expect(() => new PoolReplayTarget(pool, 2.5)).toThrow(/^decodePriority must be an integer/);
      const t = new PoolReplayTarget(pool, 10);
      expect(t.newSequence(new Int32Array(8), 5).state.retention).toEqual(parseRetention('r', [{ start: 5, priority: 10 }]));
    } finally {
      pool.dispose();
    }
  });
});

describe('kvpool replay --eviction', () => {
  const run = (args: string[]) => capture(() => main(args));

  it('replays with each policy, lru being the default', async () => {
    const base = ['replay', '--json', '--requests', '200', '--num-blocks', '400'];
    const results: Record<string, { matchedBlocks: number; idChecksum: number; promptBlocks: number }> = {};
    for (const policy of [undefined, 'lru', 'lfu', 'priority']) {
      const r = await run(policy ? [...base, '--eviction', policy] : base);
      expect(r.code).toBe(0);
      results[policy ?? 'default'] = JSON.parse(r.out);
    }
    const fixed = (r: { matchedBlocks: number; idChecksum: number; promptBlocks: number }) => [r.matchedBlocks, r.idChecksum, r.promptBlocks];
    expect(fixed(results.lru!)).toEqual(fixed(results.default!)); // timings aside
    const direct = replaySync({ requests: 200, numBlocks: 400, eviction: 'priority' });
    expect(results.priority!.idChecksum).toBe(direct.idChecksum);
    expect(results.priority!.idChecksum).not.toBe(results.lru!.idChecksum);
    expect(results.lfu!.promptBlocks).toBe(results.lru!.promptBlocks);
  });

  it('rejects an unknown policy', async () => {
    const r = await run(['replay', '--requests', '5', '--eviction', 'fifo']);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/--eviction.*fifo.*lru, lfu, priority/s);
  });
});
