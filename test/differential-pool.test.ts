// Differential property test of the pool: random scheduler-level operations
// (hundreds per run) on BlockManagerPool (Wasm core) and on the reference
// model pool must agree step by step -- results, every sequence's table,
// every manager's state, the figures -- with pool.check() after each step.
// Invalid calls are in the mix: both sides refuse them with the same error
// class and nothing changes.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockManagerPool, Sequence } from '../bindings/index.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import { ModelSequence } from '../model/sequence.js';
import { agree } from './support/agree.js';
import { rankEvictionOrder, rankFreeIds, rankSingleFreeIds } from './support/pool-probe.js';
import { sameRefusal } from './support/same-outcome.js';
import { applySequenceOp, isSequenceOp } from './support/sequence-ops.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

type Mark = { start: number; end?: number; priority: number; duration?: number };

type Op =
  | { kind: 'new'; prompt: number; len: number }
  | { kind: 'allocate'; pick: number }
  | { kind: 'allocateList'; picks: number[] }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'tryAllocate'; pick: number }
  | { kind: 'allocateShared'; pick: number }
  | { kind: 'publish'; pick: number; upTo?: number }
  | { kind: 'finish'; pick: number; withoutCache: boolean }
  | { kind: 'fork'; pick: number; swap: boolean }
  | { kind: 'checkpoint'; pick: number; boundary: number }
  | { kind: 'retain'; pick: number; marks: Mark[] }
  | { kind: 'tick'; dt: number }
  | { kind: 'resetTransfers' }
  | { kind: 'resetCache' }
  | { kind: 'bad'; which: number; pick: number };

const BAD_CALLS = 18;

const markArb: fc.Arbitrary<Mark> = fc
  .record({
    start: fc.nat({ max: 20 }),
    len: fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined }),
    priority: fc.constantFrom(0, 10, 35, 60, 100),
    duration: fc.option(fc.nat({ max: 4 }), { nil: undefined }),
  })
  .map(({ start, len, priority, duration }) => ({
    start, priority, ...(len !== undefined && { end: start + len }), ...(duration !== undefined && { duration }),
  }));

const opsWith = (checkpointWeight: number): fc.Arbitrary<Op> => fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('new' as const), prompt: fc.nat({ max: 26 }), len: fc.nat({ max: 20 }) }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('allocateList' as const), picks: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }) }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 6 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tryAllocate' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('allocateShared' as const), pick: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('publish' as const), pick: fc.nat(), upTo: fc.option(fc.nat(), { nil: undefined }) }),
  },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), withoutCache: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat(), swap: fc.boolean() }) },
  { weight: checkpointWeight, arbitrary: fc.record({ kind: fc.constant('checkpoint' as const), pick: fc.nat(), boundary: fc.nat({ max: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('retain' as const), pick: fc.nat(), marks: fc.array(markArb, { maxLength: 2 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), dt: fc.nat({ max: 3 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'resetTransfers' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'resetCache' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('bad' as const), which: fc.nat({ max: BAD_CALLS - 1 }), pick: fc.nat() }) },
);
const opArb = opsWith(1);
// With linear state, checkpoints must be common for KV hits to meet them (and their gaps).
const linearOpArb = opsWith(10);

const opsOf = (arb: fc.Arbitrary<Op>) => fc.array(arb, { minLength: 20, maxLength: 400, size: 'max' });

interface LinearOpts {
  numSlots: number;
  reuse: 'furthest' | 'contiguous';
}

/**
 * Prompts of units of 3 tokens; unit j of prompt p holds digit j of p in
 * base 3 (p < 27, later digits 0): shared prefixes, and equal content after
 * different prefixes.
 */
function promptTokens(p: number, len: number): number[] {
  const t: number[] = [];
  for (let i = 0; i < len; i++) t.push((Math.floor(p / 3 ** Math.floor(i / 3)) % 3) * 1000 + (i % 3));
  return t;
}

function sameSequence(s: Sequence, m: ModelSequence): void {
  agree(
    [Array.from(s.blockTable), s.sharedBlocks, s.kvCachedTokens, s.dpRank, s.singleBlockId, s.numTokens, s.needsSwap, s.linearStateSlotId],
    [m.blockTable, m.sharedBlocks, m.kvCachedTokens, m.dpRank, m.singleBlockId, m.numTokens, m.needsSwap, m.linearSlot],
    'table, shared, kvCached, dpRank, single, numTokens, needsSwap, linear slot',
  );
}

function samePools(p: BlockManagerPool, m: ModelBlockManagerPool): void {
  p.check();
  agree([p.numFreeBlocks(), p.numUsedBlocks(), p.numBlocksInPrefixCache()], [m.numFreeBlocks(), m.numUsedBlocks(), m.numBlocksInPrefixCache()]);
  agree([p.kvCacheUtilization(), p.gpuCacheUsage(), p.time], [m.kvCacheUtilization(), m.gpuCacheUsage(), m.time], 'utilization, usage, time');
  const stats = p.stats();
  for (let r = 0; r < p.dpSize; r++) {
    const mm = m.managers[r]!;
    const c = mm.counters;
    const st = stats[r]!;
    agree(
      [rankFreeIds(p, r), rankEvictionOrder(p, r), rankSingleFreeIds(p, r), Array.from(p.swapTransferInfos(r), (x) => ({ ...x }))],
      [mm.free, mm.prefix.lruOrder(), m.singles[r]!.free, m.swapTransferInfos(r)],
      `rank ${r}: free, eviction order, single ids, swaps`,
    );
    agree(
      {
        matchCalls: st.matchCalls, blocksQueried: st.blocksQueried, blocksHit: st.blocksHit, blocksInserted: st.blocksInserted,
        blocksEvicted: st.blocksEvicted, blocksAllocated: st.blocksAllocated, allocationFailures: st.allocationFailures,
        evictable: st.numEvictableBlocks, peak: st.peakUsedBlocks, singleFree: st.singleBlocksFree, singleUsed: st.singleBlocksUsed,
        queryTokens: st.prefixQueryTokens, hitTokens: st.prefixHitTokens, hitRate: st.prefixHitRate,
      },
      {
        ...c, evictable: mm.numEvictableBlocks(), peak: mm.peakUsed, singleFree: m.singles[r]!.free.length,
        singleUsed: m.singles[r]!.numUsedBlocks(), queryTokens: c.blocksQueried * m.blockSize, hitTokens: c.blocksHit * m.blockSize,
        hitRate: c.blocksQueried > 0 ? c.blocksHit / c.blocksQueried : 0,
      },
      `rank ${r} stats`,
    );
    if (m.ranks[r]!.linear !== null) {
      const lc = p.linearStateCache(r);
      const mc = m.linearStateCache(r);
      agree([Array.from(lc.slots.freeIds()), Array.from(lc.lruOrder())], [mc.free, mc.lruOrder()], `rank ${r} linear state`);
    }
  }
}

/** What the runs exercised, so a test fails if its generator stops reaching these paths. */
const seen = { refusals: new Set<number>(), listFailures: 0, partialPublish: 0, retentionEvictions: 0, swaps: 0 };

/**
 * An invalid call, chosen by `which`, on both sides; false when the state
 * offers nothing for that mistake. `other` is a second pool pair.
 */
function badCall(
  pool: BlockManagerPool, model: ModelBlockManagerPool, other: [BlockManagerPool, ModelBlockManagerPool],
  seqs: Array<[Sequence, ModelSequence]>, which: number, pick: number,
): boolean {
  const pair = seqs.length > 0 ? seqs[pick % seqs.length]! : null;
  const placed = seqs.filter(([s]) => s.dpRank >= 0);
  const unplaced = seqs.filter(([s]) => s.dpRank < 0);
  if (pair === null && which < 16) return false;
  const [s, m] = pair ?? [null!, null!];
  switch (which) {
    case 0: sameRefusal(() => pool.allocate(s, -1), () => model.allocate(m, -1)); break;
    case 1: sameRefusal(() => pool.allocate(s, 1.5), () => model.allocate(m, 1.5)); break;
    case 2: sameRefusal(() => (pool.allocate as (a: unknown, n: unknown) => boolean).call(pool, [s], 3), () => model.allocate([m], 3)); break;
    case 3: sameRefusal(() => pool.allocate({} as never), () => model.allocate({} as never)); break;
    case 4: sameRefusal(() => pool.allocate([s, {} as never]), () => model.allocate([m, {} as never])); break;
    case 5: sameRefusal(() => pool.cache(s, -1), () => model.cache(m, -1)); break;
    case 6: sameRefusal(() => pool.setTime(pool.time - 1), () => model.setTime(model.time - 1)); break;
    case 7: sameRefusal(() => pool.swapTransferInfos(pool.dpSize + (pick % 2)), () => model.swapTransferInfos(model.dpSize + (pick % 2))); break;
    case 8: sameRefusal(() => (s.kvCachedTokens = s.numTokens + 1), () => (m.kvCachedTokens = m.numTokens + 1)); break;
    case 9: sameRefusal(() => s.appendToken(2 ** 31), () => m.appendToken(2 ** 31)); break;
    case 10: sameRefusal(() => s.blockAt(s.numBlocks), () => m.blockAt(m.numBlocks)); break;
    case 11: {
      const r = [{ start: 0, priority: 101 }];
      sameRefusal(() => s.setRetention(r), () => model.setRetention(m, r));
      break;
    }
    case 12: {
      if (placed.length === 0) return false;
      const [ps, pm] = placed[pick % placed.length]!;
      sameRefusal(() => ps.fork({ swapLastBlock: 1 as never }), () => model.fork(pm, 1));
      break;
    }
    case 13: {
      // A sequence is used with one pool only.
      if (placed.length === 0) return false;
      const [ps, pm] = placed[pick % placed.length]!;
      sameRefusal(() => other[0].allocate(ps), () => other[1].allocate(pm));
      break;
    }
    case 14: sameRefusal(() => pool.deallocate([s, {} as never]), () => model.deallocate([m, {}] as never)); break;
    case 15: {
      if (unplaced.length === 0) return false;
      const [us, um] = unplaced[pick % unplaced.length]!;
      sameRefusal(() => us.fork(), () => model.fork(um));
      break;
    }
    case 16: {
      // A rank out of range; on a pool without linear state, any rank.
      const r = pick % 2 === 0 || model.ranks[0]!.linear !== null ? pool.dpSize : 0;
      sameRefusal(() => pool.linearStateCache(r), () => model.linearStateCache(r));
      break;
    }
    case 17: sameRefusal(() => new Sequence([1, 2.5]), () => new ModelSequence([1, 2.5])); break;
  }
  return true;
}

function run(
  ops: Op[], numBlocks: number, blockSize: number, dpSize: number, singles: number,
  linear: LinearOpts | null = null, concurrent = false, evictionPolicy: 'lru' | 'lfu' | 'priority' = 'lru',
): void {
  const opts = {
    numBlocks, blockSize, dpSize, singleBlockCapacity: singles,
    ...(linear ? { enableLinearState: true, linearStateNumSlots: linear.numSlots, linearStateReuse: linear.reuse } : {}),
    ...(evictionPolicy !== 'lru' ? { evictionPolicy } : {}),
  };
  const pool = new BlockManagerPool(concurrent ? { ...opts, enableKvcacheStore: true } : opts);
  const model = new ModelBlockManagerPool(opts);
  model.trackPeaks();
  const other: [BlockManagerPool, ModelBlockManagerPool] = [new BlockManagerPool({ numBlocks: 4, blockSize }), new ModelBlockManagerPool({ numBlocks: 4, blockSize })];
  const seqs: Array<[Sequence, ModelSequence]> = [];
  const pick = (i: number) => seqs[i % seqs.length]!;
  try {
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = promptTokens(op.prompt, op.len);
        seqs.push([new Sequence(t), model.newSequence(t)]);
      } else if (op.kind === 'tick') {
        pool.setTime(pool.time + op.dt);
        model.setTime(model.time + op.dt);
      } else if (op.kind === 'resetTransfers') {
        pool.resetTransferInfos();
        model.resetTransferInfos();
      } else if (op.kind === 'resetCache') {
        agree(pool.resetPrefixCache(), model.resetPrefixCache());
      } else if (op.kind === 'bad') {
        if (badCall(pool, model, other, seqs, op.which, op.pick)) seen.refusals.add(op.which);
      } else if (op.kind === 'allocateList') {
        if (seqs.length > 0) {
          const list = op.picks.map((i) => pick(i));
          const ok = model.allocate(list.map(([, x]) => x));
          agree(pool.allocate(list.map(([x]) => x)), ok);
          if (!ok) seen.listFailures++;
        }
      } else if (seqs.length > 0) {
        const pair = pick(op.pick);
        const [s, m] = pair;
        if (isSequenceOp(op)) {
          if (op.kind === 'publish' && op.upTo !== undefined && op.upTo % (s.numTokens + 2) < s.numTokens) seen.partialPublish++;
          if (op.kind === 'fork' && op.swap) seen.swaps++;
          const forked = applySequenceOp(pool, model, pair, op, blockSize);
          if (forked) seqs.push(forked);
        } else if (op.kind === 'retain') {
          s.setRetention(op.marks);
          model.setRetention(m, op.marks);
        } else if (op.kind === 'checkpoint') {
          // The worker saved the state at a block boundary of this sequence's tokens.
          const k = op.boundary + 1;
          if (linear && s.dpRank >= 0 && k * blockSize <= s.numTokens) {
            const c = pool.linearStateCache(s.dpRank);
            const r = c.reserveCheckpoint(s.prefixHash(k * blockSize));
            const mc = model.linearStateCache(s.dpRank);
            const mr = mc.reserve(model.prefixKeys(m, k)[k - 1]!, false);
            agree(r.slot, mr.slot);
            if (r.reservation) agree(c.commit(r.reservation), mc.commit(mr.slot));
          }
        }
      }
      for (const [s, m] of seqs) sameSequence(s, m);
      samePools(pool, model);
    }
    countSteps(ops.length);
    if (evictionPolicy === 'priority') seen.retentionEvictions += model.managers.reduce((a, x) => a + x.counters.blocksEvicted, 0);
    for (const [s, m] of seqs) {
      pool.deallocate(s);
      model.deallocate(m);
    }
    samePools(pool, model);
    expect(pool.numUsedBlocks().every((u) => u === 0)).toBe(true);
  } finally {
    pool.dispose();
    other[0].dispose();
  }
}

/** numBlocks, blockSize, dpSize, single ids: the pool shapes every property draws. */
const sizes = [
  fc.integer({ min: 3, max: 40 }),
  fc.integer({ min: 1, max: 4 }),
  fc.integer({ min: 1, max: 3 }),
  fc.integer({ min: 2, max: 6 }),
] as const;

describe('pool vs reference model', () => {
  it('agrees on random scheduler operations', () => {
    fc.assert(
      fc.property(opsOf(opArb), ...sizes, (ops, numBlocks, blockSize, dpSize, singles) => run(ops, numBlocks, blockSize, dpSize, singles)),
      { numRuns: soak(80) },
    );
    expect([...seen.refusals].sort((a, b) => a - b)).toEqual(Array.from({ length: BAD_CALLS }, (_, i) => i));
    for (const k of ['listFailures', 'partialPublish', 'swaps'] as const) expect(seen[k], k).toBeGreaterThan(0);
  });

  it('agrees with linear state on (live slots, dp skipping, trimming to checkpoints)', () => {
    fc.assert(
      fc.property(
        opsOf(linearOpArb),
        ...sizes,
        fc.record({ numSlots: fc.integer({ min: 2, max: 16 }), reuse: fc.constantFrom('furthest' as const, 'contiguous' as const) }),
        (ops, numBlocks, blockSize, dpSize, singles, linear) => run(ops, numBlocks, blockSize, dpSize, singles, linear),
      ),
      { numRuns: soak(30) },
    );
  });

  it('agrees with the LFU and priority eviction policies (retention marks, the clock)', () => {
    fc.assert(
      fc.property(
        opsOf(opArb),
        ...sizes,
        fc.constantFrom('lfu' as const, 'priority' as const),
        (ops, numBlocks, blockSize, dpSize, singles, policy) => run(ops, numBlocks, blockSize, dpSize, singles, null, false, policy),
      ),
      { numRuns: soak(30) },
    );
    expect(seen.retentionEvictions).toBeGreaterThan(0);
  });

  it('agrees with ConcurrentBlockManagerImpl ranks (enableKvcacheStore)', () => {
    fc.assert(
      fc.property(opsOf(opArb), ...sizes, (ops, numBlocks, blockSize, dpSize, singles) => run(ops, numBlocks, blockSize, dpSize, singles, null, true)),
      { numRuns: soak(10) },
    );
  });
});
