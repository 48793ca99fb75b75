// Differential property test of composite ranks: many sequences growing,
// decoding (the window sliding), forking and finishing on a BlockManagerPool
// with `managerTypes` (Wasm core) and on the reference model must agree step
// by step -- results, every table, every free stack, the window counters --
// with pool.check() after each step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import type { ModelKind } from '../model/composite-block-manager.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import type { ModelSequence } from '../model/sequence.js';
import { agree } from './support/agree.js';
import { rankSingleFreeIds } from './support/pool-probe.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

type Op =
  | { kind: 'new'; len: number }
  | { kind: 'allocate'; pick: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'tryAllocate'; pick: number }
  | { kind: 'finish'; pick: number }
  | { kind: 'fork'; pick: number }
  | { kind: 'compute'; pick: number; cached: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('new' as const), len: fc.nat({ max: 24 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 8 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tryAllocate' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('compute' as const), pick: fc.nat(), cached: fc.nat({ max: 40 }) }) },
);

interface Layout {
  blockSize: number;
  numBlocks: number;
  kinds: ModelKind[];
  ratios: number[];
  window: number;
  maxSeqsPerBatch: number;
  maxTokensPerBatch: number;
  dpSize: number;
  singles: number;
}

const layoutArb: fc.Arbitrary<Layout> = fc
  .record({
    blockSize: fc.integer({ min: 1, max: 4 }),
    numBlocks: fc.integer({ min: 6, max: 40 }),
    subs: fc.array(fc.record({ window: fc.boolean(), ratio: fc.integer({ min: 0, max: 3 }) }), { minLength: 1, maxLength: 3 }),
    window: fc.integer({ min: 1, max: 14 }),
    maxSeqsPerBatch: fc.integer({ min: 0, max: 3 }),
    maxTokensPerBatch: fc.integer({ min: 0, max: 12 }),
    dpSize: fc.integer({ min: 1, max: 2 }),
    singles: fc.integer({ min: 2, max: 6 }),
  })
  .map((r) => ({
    blockSize: r.blockSize,
    numBlocks: r.numBlocks,
    kinds: r.subs.map((s) => (s.window ? 'sliding-window' : 'full') as ModelKind),
    ratios: r.subs.map((s) => (s.window ? s.ratio : Math.max(1, s.ratio))),
    window: r.window,
    maxSeqsPerBatch: r.maxSeqsPerBatch,
    maxTokensPerBatch: r.maxTokensPerBatch,
    dpSize: r.dpSize,
    singles: r.singles,
  }));

/** Tables as plain arrays; a sequence that holds nothing has none. */
function norm(t: ArrayLike<number>[]): number[][] {
  return t.every((x) => x.length === 0) ? [] : t.map((x) => Array.from(x));
}

function run(L: Layout, ops: Op[]): void {
  const pool = new BlockManagerPool({
    numBlocks: L.numBlocks,
    blockSize: L.blockSize,
    dpSize: L.dpSize,
    singleBlockCapacity: L.singles,
    managerTypes: L.kinds,
    compressRatios: L.ratios,
    // Window options only shape window sub-managers (the pool refuses them otherwise).
    ...(L.kinds.includes('sliding-window') && { slidingWindowSize: L.window, maxSeqsPerBatch: L.maxSeqsPerBatch, maxTokensPerBatch: L.maxTokensPerBatch }),
  });
  const model = new ModelBlockManagerPool({
    numBlocks: L.numBlocks,
    blockSize: L.blockSize,
    dpSize: L.dpSize,
    singleBlockCapacity: L.singles,
    managerTypes: L.kinds,
    compressRatios: L.ratios,
    ...(L.kinds.includes('sliding-window') && { slidingWindowSize: L.window, maxSeqsPerBatch: L.maxSeqsPerBatch, maxTokensPerBatch: L.maxTokensPerBatch }),
  });
  const seqs: Array<[Sequence, ModelSequence]> = [];
  let next = 0;
  try {
    for (let r = 0; r < L.dpSize; r++) expect(pool.compositeManager(r)!.specs.map((s) => [s.kind, s.blockSize, s.numBlocks])).toEqual(model.compositeManager(r)!.specs.map((s) => [s.kind, s.blockSize, s.numBlocks]));
    const same = () => {
      pool.check();
      for (const [s, m] of seqs) {
        agree({ t: norm(s.compositeBlockTables), kv: s.kvCachedTokens, dp: s.dpRank, single: s.singleBlockId, n: s.numTokens }, {
          t: norm(m.tables ?? []),
          kv: m.kvCachedTokens,
          dp: m.dpRank,
          single: m.singleBlockId,
          n: m.numTokens,
        });
      }
      agree([pool.numFreeBlocks(), pool.numUsedBlocks()], [model.numFreeBlocks(), model.numUsedBlocks()], 'free, used');
      for (let r = 0; r < L.dpSize; r++) {
        const c = pool.compositeManager(r)!;
        const mr = model.compositeManager(r)!;
        const st = c.subManagerStats();
        agree(
          [c.capacityIndex, c.subManagers.map((x) => Array.from(x.freeIds())), st.map((x) => x.peakUsedBlocks), st.map((x) => x.blocksReleasedOutOfWindow), rankSingleFreeIds(pool, r)],
          [mr.capacityIndex, mr.subs.map((x) => x.free), mr.peaks, mr.releasedOut, model.singles[r]!.free],
          `rank ${r}: capacity index, free stacks, peaks, released out of window, single ids`,
        );
      }
    };
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = Array.from({ length: op.len }, (_, i) => next * 100 + i);
        next++;
        seqs.push([new Sequence(t), model.newSequence(t)]);
      } else if (seqs.length > 0) {
        const [s, m] = seqs[op.pick % seqs.length]!;
        switch (op.kind) {
          case 'allocate':
            agree(pool.allocate(s), model.allocate(m));
            break;
          case 'decode':
            if (norm(s.compositeBlockTables).length === 0) break;
            s.kvCachedTokens = m.kvCachedTokens = s.numTokens;
            for (let i = 0; i < op.steps; i++) {
              s.appendToken(9000 + i);
              m.appendToken(9000 + i);
              s.kvCachedTokens = m.kvCachedTokens = s.numTokens - 1;
              const ok = pool.allocate(s, s.numTokens);
              agree(ok, model.allocate(m, m.numTokens));
              if (!ok) break;
            }
            break;
          case 'tryAllocate':
            agree(pool.tryAllocate(s), model.tryAllocate(m));
            break;
          case 'finish':
            pool.deallocate(s);
            model.deallocate(m);
            break;
          case 'compute': // any computed count, then a round for every token: the window follows the count
            s.kvCachedTokens = m.kvCachedTokens = Math.min(op.cached, s.numTokens);
            agree(pool.allocate(s, s.numTokens), model.allocate(m, m.numTokens));
            break;
          case 'fork':
            if (s.dpRank >= 0) seqs.push([s.fork(), model.fork(m)]);
            break;
        }
      }
      same();
    }
    countSteps(ops.length);
    for (const [s, m] of seqs) {
      pool.deallocate(s);
      model.deallocate(m);
    }
    same();
    for (let r = 0; r < L.dpSize; r++) {
      for (const x of pool.compositeManager(r)!.subManagers) expect(x.numFreeBlocks()).toBe(x.numTotalBlocks());
    }
  } finally {
    pool.dispose();
  }
}

describe('composite pool vs reference model', () => {
  it('agrees on many sequences growing, sliding and finishing', () => {
    fc.assert(
      fc.property(layoutArb, fc.array(opArb, { minLength: 20, maxLength: 300, size: 'max' }), (L, ops) => {
        fc.pre(L.kinds.every((k, i) => k !== 'full' || Math.floor(L.numBlocks / L.ratios[i]!) >= 2));
        run(L, ops);
      }),
      { numRuns: soak(80) },
    );
  });
});
