// Differential property test of the pool: random scheduler-level operations
// on BlockManagerPool (Wasm core) and on the reference model pool must agree
// step by step -- results, every sequence's table, every manager's state --
// with pool.check() after each step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelBlockManagerPool } from './model/block-manager-pool.js';
import { applySequenceOp, isSequenceOp } from './support/sequence-ops.js';
import type { ModelSequence } from './model/sequence.js';

type Op =
  | { kind: 'new'; prompt: number; len: number }
  | { kind: 'allocate'; pick: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'tryAllocate'; pick: number }
  | { kind: 'allocateShared'; pick: number }
  | { kind: 'publish'; pick: number }
  | { kind: 'finish'; pick: number; withoutCache: boolean }
  | { kind: 'fork'; pick: number; swap: boolean }
  | { kind: 'checkpoint'; pick: number; boundary: number };

const opsWith = (checkpointWeight: number): fc.Arbitrary<Op> => fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('new' as const), prompt: fc.nat({ max: 9 }), len: fc.nat({ max: 20 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 6 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tryAllocate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('allocateShared' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('publish' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), withoutCache: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat(), swap: fc.boolean() }) },
  { weight: checkpointWeight, arbitrary: fc.record({ kind: fc.constant('checkpoint' as const), pick: fc.nat(), boundary: fc.nat({ max: 4 }) }) },
);
const opArb = opsWith(1);
// With linear state, checkpoints must be common for KV hits to meet them (and their gaps).
const linearOpArb = opsWith(6);

interface LinearOpts {
  numSlots: number;
  reuse: 'furthest' | 'contiguous';
}

function promptTokens(p: number, len: number): number[] {
  const root = p % 3;
  const t: number[] = [];
  for (let i = 0; i < len; i++) t.push(i < 6 ? root * 1000 + i : root * 1000 + (p % 4) * 100 + i);
  return t;
}

function sameSequence(s: Sequence, m: ModelSequence): void {
  expect({
    table: [...s.blockTable],
    shared: s.sharedBlocks,
    kv: s.kvCachedTokens,
    dp: s.dpRank,
    single: s.singleBlockId,
    n: s.numTokens,
    swap: s.needsSwap,
    slot: s.linearStateSlotId,
  }).toEqual({
    table: m.blockTable,
    shared: m.sharedBlocks,
    kv: m.kvCachedTokens,
    dp: m.dpRank,
    single: m.singleBlockId,
    n: m.numTokens,
    swap: m.needsSwap,
    slot: m.linearSlot,
  });
}

function samePools(p: BlockManagerPool, m: ModelBlockManagerPool): void {
  p.check();
  expect(p.numFreeBlocks()).toEqual(m.numFreeBlocks());
  expect(p.numUsedBlocks()).toEqual(m.numUsedBlocks());
  expect(p.numBlocksInPrefixCache()).toEqual(m.numBlocksInPrefixCache());
  for (let r = 0; r < p.dpSize; r++) {
    expect([...p.managers[r]!.freeIds()]).toEqual(m.managers[r]!.free);
    expect([...p.managers[r]!.lruOrder()]).toEqual(m.managers[r]!.prefix.lruOrder());
    expect([...p.singles[r]!.freeIds()]).toEqual(m.singles[r]!.free);
    expect(p.stats()[r]!.blocksEvicted).toBe(m.managers[r]!.counters.blocksEvicted);
    expect(p.swapTransferInfos(r)).toEqual(m.swaps[r]);
    if (m.linear.length > 0) {
      const c = p.linearStateCache(r);
      expect([...c.slots.freeIds()]).toEqual(m.linear[r]!.free);
      expect([...c.lruOrder()]).toEqual(m.linear[r]!.lruOrder());
    }
  }
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
  const seqs: Array<[Sequence, ModelSequence]> = [];
  const pick = (i: number) => seqs[i % seqs.length]!;
  try {
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = promptTokens(op.prompt, op.len);
        seqs.push([new Sequence(t), model.newSequence(t)]);
      } else if (seqs.length > 0) {
        const pair = pick(op.pick);
        const [s, m] = pair;
        if (isSequenceOp(op)) {
          const forked = applySequenceOp(pool, model, pair, op, blockSize);
          if (forked) seqs.push(forked);
        } else if (op.kind === 'checkpoint') {
          // The worker saved the state at a block boundary of this sequence's tokens.
          const k = op.boundary + 1;
          if (linear && s.dpRank >= 0 && k * blockSize <= s.numTokens) {
            const c = pool.linearStateCache(s.dpRank);
            const r = c.reserveCheckpoint(s.prefixHash(k * blockSize));
            const mr = model.linear[s.dpRank]!.reserve(model.boundaryKeys(m, k)[k - 1]!, false);
            expect(r.slot).toBe(mr.slot);
            if (r.reservation) expect(c.commit(r.reservation)).toBe(model.linear[s.dpRank]!.commit(mr.slot));
          }
        }
      }
      for (const [s, m] of seqs) sameSequence(s, m);
      samePools(pool, model);
    }
    for (const [s, m] of seqs) {
      pool.deallocate(s);
      model.deallocate(m);
    }
    samePools(pool, model);
    expect(pool.numUsedBlocks().every((u) => u === 0)).toBe(true);
  } finally {
    pool.dispose();
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
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 50 }),
        ...sizes,
        (ops, numBlocks, blockSize, dpSize, singles) => run(ops, numBlocks, blockSize, dpSize, singles),
      ),
      { numRuns: 300 },
    );
  });

  it('agrees with linear state on (live slots, dp skipping, trimming to checkpoints)', () => {
    fc.assert(
      fc.property(
        fc.array(linearOpArb, { minLength: 25, maxLength: 50 }),
        ...sizes,
        fc.record({ numSlots: fc.integer({ min: 2, max: 16 }), reuse: fc.constantFrom('furthest' as const, 'contiguous' as const) }),
        (ops, numBlocks, blockSize, dpSize, singles, linear) => run(ops, numBlocks, blockSize, dpSize, singles, linear),
      ),
      { numRuns: 100 },
    );
  });

  it('agrees with the LFU and priority eviction policies', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 50 }),
        ...sizes,
        fc.constantFrom('lfu' as const, 'priority' as const),
        (ops, numBlocks, blockSize, dpSize, singles, policy) => run(ops, numBlocks, blockSize, dpSize, singles, null, false, policy),
      ),
      { numRuns: 150 },
    );
  });

  it('agrees with ConcurrentBlockManagerImpl ranks (enableKvcacheStore)', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 50 }),
        ...sizes,
        (ops, numBlocks, blockSize, dpSize, singles) => run(ops, numBlocks, blockSize, dpSize, singles, null, true),
      ),
      { numRuns: 100 },
    );
  });
});
