// Differential property test of the host tier: random operations on
// HierarchyBlockManagerPool (Wasm core) and on the model must agree step by
// step -- results, refusals, sequences' device and host tables, plans, and
// both tiers' state -- with pool.check() after each step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HierarchyBlockManagerPool, type OffloadPlan } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelHierarchyPool, type ModelOffloadPlan } from '../model/hierarchy-block-manager-pool.js';
import { agree } from './support/agree.js';
import { hostRankState, rankEvict, rankEvictionOrder, rankFreeIds } from './support/pool-probe.js';
import { sameOutcome } from './support/same-outcome.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';
import type { ModelSequence } from '../model/sequence.js';

type Op =
  | { kind: 'new'; prompt: number; len: number; start: 'no' | 'full' | 'chunk'; tokens: number; copy: number }
  | { kind: 'allocate'; pick: number }
  | { kind: 'chunk'; pick: number; tokens: number; copy: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'allocateShared'; pick: number }
  | { kind: 'finish'; pick: number; withoutCache: boolean }
  | { kind: 'fork'; pick: number; swap: boolean }
  | { kind: 'tryAllocate'; pick: number }
  | { kind: 'publish'; pick: number; upTo: number }
  | { kind: 'take' }
  | { kind: 'complete'; pick: number; ok: boolean }
  | { kind: 'evict'; rank: number; n: number }
  | { kind: 'flush'; ok: boolean; evict: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({
      kind: fc.constant('new' as const),
      prompt: fc.nat({ max: 3 }),
      len: fc.nat({ max: 20 }),
      start: fc.constantFrom('no' as const, 'full' as const, 'chunk' as const),
      tokens: fc.nat({ max: 12 }),
      copy: fc.nat({ max: 3 }),
    }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('chunk' as const), pick: fc.nat(), tokens: fc.nat({ max: 24 }), copy: fc.nat({ max: 3 }) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('allocateShared' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), withoutCache: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat(), swap: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tryAllocate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('publish' as const), pick: fc.nat(), upTo: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('take' as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('complete' as const), pick: fc.nat(), ok: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('evict' as const), rank: fc.nat({ max: 2 }), n: fc.nat({ max: 30 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('flush' as const), ok: fc.boolean(), evict: fc.nat({ max: 8 }) }) },
);

function promptTokens(p: number, len: number): number[] {
  const t: number[] = [];
  for (let i = 0; i < len; i++) t.push(i < 8 ? (p % 2) * 1000 + i : p * 1000 + i);
  return t;
}

/** What the runs exercised, so the test fails if the generator stops reaching the host tier. */
const seen = { loads: 0, offloads: 0, refusals: 0, failedPlans: 0, hostHits: 0, tryAllocates: 0, swapForks: 0, publishes: 0 };

/** Same outcome: both return the same value, or both throw an error of the same class. */
function same<T>(a: () => T, b: () => T): void {
  if (!sameOutcome(a, b).ok) seen.refusals++;
}

function run(ops: Op[], numBlocks: number, hostNumBlocks: number, blockSize: number, dpSize: number, singles: number): void {
  const opts = { numBlocks, blockSize, dpSize, hostNumBlocks, singleBlockCapacity: singles };
  const pool = new HierarchyBlockManagerPool(opts);
  const model = new ModelHierarchyPool(opts);
  const seqs: Array<[Sequence, ModelSequence]> = [];
  const plans: Array<[OffloadPlan, ModelOffloadPlan]> = [];
  const pick = (i: number) => seqs[i % seqs.length]!;
  /** The model computed what the sequence has room for. */
  const compute = (s: Sequence, m: ModelSequence) => {
    const kv = Math.min(s.numTokens, s.numBlocks * blockSize);
    if (s.numBlocks > 0 && s.kvCachedTokens < kv) s.kvCachedTokens = m.kvCachedTokens = kv;
  };
  const compare = () => {
    pool.check();
    for (const [s, m] of seqs) {
      agree({ t: [...s.blockTable], sh: s.sharedBlocks, kv: s.kvCachedTokens, dp: s.dpRank, h: [...pool.hostBlockTable(s)], hkv: pool.hostKvCachedTokens(s) }, {
        t: m.blockTable,
        sh: m.sharedBlocks,
        kv: m.kvCachedTokens,
        dp: m.dpRank,
        h: model.hostBlockTable(m),
        hkv: model.hostKvCachedTokens(m),
      });
    }
    agree([pool.numFreeBlocks(), pool.numUsedBlocks()], [model.numFreeBlocks(), model.numUsedBlocks()], 'free, used');
    for (let r = 0; r < dpSize; r++) {
      agree(
        [rankFreeIds(pool, r), rankEvictionOrder(pool, r), hostRankState(pool, r), pool.hostNumUsedBlocks()[r]],
        [model.managers[r]!.free, model.managers[r]!.prefix.lruOrder(), { free: model.hosts[r]!.free, evictionOrder: model.hosts[r]!.prefix.lruOrder() }, model.hosts[r]!.numUsedBlocks()],
        `rank ${r}: device free, device order, host, host used`,
      );
      agree(pool.swapTransferInfos(r).map((x) => ({ ...x })), model.swapTransferInfos(r), `rank ${r} swaps`);
    }
  };
  try {
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = promptTokens(op.prompt, op.len);
        const s = new Sequence(t);
        const m = model.newSequence(t);
        seqs.push([s, m]);
        // A request that arrives and is admitted at once (the path that hits the host tier).
        if (op.start === 'full') {
          same(() => pool.allocate(s), () => model.allocate(m));
          compute(s, m);
        } else if (op.start === 'chunk') {
          const n = Math.min(op.tokens, s.numTokens);
          same(() => pool.allocateChunked(s, n, op.copy), () => model.allocateChunked(m, n, op.copy));
        }
      } else if (op.kind === 'take') {
        const a = pool.takeTransfers();
        const b = model.takeTransfers();
        expect(a.map((x) => x.loads.map((l) => [l.src, l.dst]))).toEqual(b.map((x) => x.loads.map((l) => [l.src, l.dst])));
        expect(a.map((x) => x.offload?.blocks.map((l) => [l.src, l.dst]) ?? null)).toEqual(
          b.map((x) => x.offload?.blocks.map((l) => [l.src, l.dst]) ?? null),
        );
        a.forEach((x, r) => {
          seen.loads += x.loads.length;
          if (x.offload) plans.push([x.offload, b[r]!.offload!]);
        });
      } else if (op.kind === 'complete') {
        if (plans.length > 0) {
          const [p, m] = plans.splice(op.pick % plans.length, 1)[0]!;
          pool.completeOffload(p, op.ok);
          model.completeOffload(m, op.ok);
          if (!op.ok) seen.failedPlans++;
        }
      } else if (op.kind === 'flush') {
        // The worker does every pending copy at once.
        const a = pool.takeTransfers();
        const b = model.takeTransfers();
        a.forEach((x, r) => {
          seen.loads += x.loads.length;
          if (x.offload) plans.push([x.offload, b[r]!.offload!]);
        });
        expect(a.map((x) => x.loads.map((l) => [l.src, l.dst]))).toEqual(b.map((x) => x.loads.map((l) => [l.src, l.dst])));
        for (const [p, m] of plans.splice(0)) {
          pool.completeOffload(p, op.ok);
          model.completeOffload(m, op.ok);
          if (!op.ok) seen.failedPlans++;
        }
        // Device pressure: the device cache loses entries the host may now hold.
        for (let r = 0; r < dpSize; r++) agree(rankEvict(pool, r, op.evict), model.managers[r]!.evict(op.evict));
      } else if (op.kind === 'evict') {
        // The device cache loses entries the host still has: the next prompt loads them.
        const r = op.rank % dpSize;
        agree(rankEvict(pool, r, op.n), model.managers[r]!.evict(op.n));
      } else if (seqs.length > 0) {
        const [s, m] = pick(op.pick);
        switch (op.kind) {
          case 'allocate':
            same(() => pool.allocate(s), () => model.allocate(m));
            compute(s, m);
            break;
          case 'chunk': {
            const n = Math.min(op.tokens, s.numTokens);
            same(() => pool.allocateChunked(s, n, op.copy), () => model.allocateChunked(m, n, op.copy));
            break;
          }
          case 'decode':
            for (let i = 0; i < op.steps && s.numBlocks > 0; i++) {
              s.appendToken(7000 + i);
              m.appendToken(7000 + i);
              s.kvCachedTokens = m.kvCachedTokens = s.numTokens - 1;
              same(() => pool.allocate(s, s.numTokens), () => model.allocate(m, m.numTokens));
            }
            break;
          case 'allocateShared':
            same(() => pool.allocateShared(s), () => model.allocateShared(m));
            break;
          case 'finish':
            if (op.withoutCache) {
              pool.deallocateWithoutCache(s);
              model.deallocate(m, false);
            } else {
              pool.deallocate(s);
              model.deallocate(m);
            }
            break;
          case 'fork':
            if (s.dpRank >= 0) {
              seqs.push([s.fork({ swapLastBlock: op.swap }), model.fork(m, op.swap)]);
              if (op.swap && s.numBlocks > 0) seen.swapForks++;
            }
            break;
          case 'tryAllocate':
            same(() => pool.tryAllocate(s), () => model.tryAllocate(m));
            seen.tryAllocates++;
            break;
          case 'publish':
            // The KV of the first tokens is published while the sequence runs.
            if (s.dpRank >= 0) {
              const n = op.upTo % (s.numTokens + 2);
              pool.cache(s, n);
              model.cache(m, n);
              seen.publishes++;
            }
            break;
        }
      }
      compare();
    }
    countSteps(ops.length);
    for (const [s, m] of seqs) {
      pool.deallocate(s);
      model.deallocate(m);
    }
    const a = pool.takeTransfers();
    const b = model.takeTransfers();
    a.forEach((x, r) => {
      seen.loads += x.loads.length;
      if (x.offload) plans.push([x.offload, b[r]!.offload!]);
    });
    for (const [p, m] of plans) {
      pool.completeOffload(p, true);
      model.completeOffload(m, true);
    }
    compare();
    for (const st of pool.hierarchyStats()) {
      seen.offloads += st.blocksOffloaded;
      seen.hostHits += st.hostHitBlocks;
    }
    expect(pool.numUsedBlocks().every((u) => u === 0)).toBe(true);
    expect(pool.hostNumUsedBlocks().every((u) => u === 0)).toBe(true);
  } finally {
    pool.dispose();
  }
}

/**
 * Fills the host tier with every prompt family first, so random runs meet
 * host hits often; on the way, prompt 0 comes back as a refused short chunk
 * and then with loads, and prompt 1's offload fails (when the host is big
 * enough to take them at all).
 */
const warmUp: Op[] = [
  { kind: 'new', prompt: 0, len: 20, start: 'full', tokens: 0, copy: 0 },
  { kind: 'finish', pick: 0, withoutCache: false },
  { kind: 'flush', ok: true, evict: 30 },
  { kind: 'new', prompt: 0, len: 20, start: 'chunk', tokens: 1, copy: 3 },
  { kind: 'new', prompt: 0, len: 20, start: 'full', tokens: 0, copy: 0 },
  { kind: 'take' },
  ...[1, 2, 3].flatMap((p): Op[] => [
    { kind: 'new', prompt: p, len: 20, start: 'full', tokens: 0, copy: 0 },
    { kind: 'finish', pick: p + 2, withoutCache: false },
    { kind: 'flush', ok: p !== 1, evict: 30 },
  ]),
];

describe('host tier vs reference model', () => {
  it('agrees on random operations', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 20, maxLength: 300, size: 'max' }),
        fc.integer({ min: 3, max: 16 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 2, max: 8 }),
        (ops, numBlocks, hostNumBlocks, blockSize, dpSize, singles) =>
          run([...warmUp, ...ops], numBlocks, hostNumBlocks, blockSize, dpSize, singles),
      ),
      { numRuns: soak(60) },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});
