// completeTransfersNow() against the plan path: two host-tier pools driven by
// the same random operations, one finishing its copies with takeTransfers()
// and completeOffload(plan, true), the other with completeTransfersNow(),
// must agree after every step -- results, sequences' device and host tables,
// both tiers' free stacks and eviction orders, statistics and (when
// recording) the KV-cache events -- with check() on both. The same harness
// compares a pool whose offloads complete within each release
// (completeOffloadsAtRelease, the replay's path: one core call) with one
// that calls completeTransfersNow() after every operation.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ERR_EVENTS_ON, ERR_NOT_HELD, ERR_OUT_OF_RANGE, ERR_PADDING } from '../bindings/core/abi.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { agree } from './support/agree.js';
import { hostRankState, rankEvict, rankEvictionOrder, rankFreeIds } from './support/pool-probe.js';
import { sameOutcome } from './support/same-outcome.js';
import { soak } from './support/soak.js';

type Op =
  | { kind: 'new'; prompt: number; len: number }
  | { kind: 'allocate'; pick: number }
  | { kind: 'chunk'; pick: number; tokens: number; copy: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'finish'; pick: number; withoutCache: boolean }
  | { kind: 'fork'; pick: number }
  | { kind: 'flush'; evict: number }
  | { kind: 'evict'; rank: number; n: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('new' as const), prompt: fc.nat({ max: 3 }), len: fc.nat({ max: 24 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('chunk' as const), pick: fc.nat(), tokens: fc.nat({ max: 24 }), copy: fc.nat({ max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), withoutCache: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('flush' as const), evict: fc.nat({ max: 10 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('evict' as const), rank: fc.nat({ max: 1 }), n: fc.nat({ max: 20 }) }) },
);

function promptTokens(p: number, len: number): number[] {
  const t: number[] = [];
  for (let i = 0; i < len; i++) t.push(i < 8 ? (p % 2) * 1000 + i : p * 1000 + i);
  return t;
}

/** What the runs exercised, so the test fails if the generator stops reaching offloads and loads. */
const seen = { offloaded: 0, loaded: 0 };

/**
 * With `atRelease`, `now` completes each offload within its release and
 * `plan` calls completeTransfersNow() after every operation (as does `now`,
 * for its loads and for what it queued while recording events).
 */
function run(ops: Op[], numBlocks: number, hostNumBlocks: number, dpSize: number, events: boolean, atRelease = false): void {
  const opts = { numBlocks, blockSize: 4, dpSize, hostNumBlocks };
  const plan = new HierarchyBlockManagerPool(opts);
  const now = new HierarchyBlockManagerPool(opts);
  if (atRelease) now.completeOffloadsAtRelease();
  if (events) for (const p of [plan, now]) p.recordEvents(true);
  const seqs: Array<[Sequence, Sequence]> = [];
  const both = (f: (p: HierarchyBlockManagerPool, s: Sequence) => unknown, i: number) => {
    const [a, b] = seqs[i % seqs.length]!;
    sameOutcome(() => f(plan, a), () => f(now, b));
  };
  const offloaded = (p: HierarchyBlockManagerPool) => p.hierarchyStats().reduce((x, s) => x + s.blocksOffloaded, 0);
  const flushBoth = () => {
    const n = plan.completeTransfersNow();
    now.completeTransfersNow();
    expect(offloaded(now)).toBe(offloaded(plan));
    return n;
  };
  const flush = () => {
    if (atRelease) return flushBoth();
    // What each path says was offloaded: the plans' hashes, and what onOffload sees.
    const planned: string[] = [];
    for (const t of plan.takeTransfers()) {
      if (!t.offload) continue;
      planned.push(`${t.offload.dpRank}:${t.offload.blocks.map((b) => b.hash.join('.')).join(',')}`);
      plan.completeOffload(t.offload, true);
    }
    const seenNow: string[] = [];
    const n = now.completeTransfersNow((rank, hashes) => {
      const each = Array.from({ length: hashes.length / 16 }, (_, i) => hashes.subarray(i * 16, i * 16 + 16).join('.'));
      seenNow.push(`${rank}:${each.join(',')}`);
    });
    expect(seenNow).toEqual(planned);
    expect(now.hasPendingTransfers()).toBe(false);
    expect(now.offloadsInFlight()).toEqual([]);
    return n;
  };
  const compare = () => {
    plan.check();
    now.check();
    for (const [a, b] of seqs) {
      agree(
        { t: [...b.blockTable], kv: b.kvCachedTokens, dp: b.dpRank, h: [...now.hostBlockTable(b)], hkv: now.hostKvCachedTokens(b) },
        { t: [...a.blockTable], kv: a.kvCachedTokens, dp: a.dpRank, h: [...plan.hostBlockTable(a)], hkv: plan.hostKvCachedTokens(a) },
      );
    }
    for (let r = 0; r < dpSize; r++) {
      agree(
        [rankFreeIds(now, r), rankEvictionOrder(now, r), hostRankState(now, r)],
        [rankFreeIds(plan, r), rankEvictionOrder(plan, r), hostRankState(plan, r)],
        `rank ${r}: device free, device order, host`,
      );
    }
    agree([now.stats(), now.hostStats(), now.hierarchyStats(), now.numFreeBlocks(), now.hostNumUsedBlocks()],
      [plan.stats(), plan.hostStats(), plan.hierarchyStats(), plan.numFreeBlocks(), plan.hostNumUsedBlocks()], 'figures');
    if (events) expect(now.drainEvents()).toEqual(plan.drainEvents());
  };
  try {
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = promptTokens(op.prompt, op.len);
        seqs.push([new Sequence(t), new Sequence(t)]);
        both((p, s) => p.allocate(s), seqs.length - 1);
      } else if (op.kind === 'flush') {
        seen.offloaded += flush();
        // Device pressure: the device loses entries the host may now hold (the next prompt loads them).
        for (let r = 0; r < dpSize; r++) agree(rankEvict(now, r, op.evict), rankEvict(plan, r, op.evict));
      } else if (op.kind === 'evict') {
        const r = op.rank % dpSize;
        agree(rankEvict(now, r, op.n), rankEvict(plan, r, op.n));
      } else if (seqs.length > 0) {
        switch (op.kind) {
          case 'allocate':
            both((p, s) => {
              const ok = p.allocate(s);
              // What the sequence has room for is computed.
              if (ok) s.kvCachedTokens = Math.min(s.numTokens, s.numBlocks * 4);
              return ok;
            }, op.pick);
            break;
          case 'chunk':
            both((p, s) => p.allocateChunked(s, Math.min(op.tokens, s.numTokens), op.copy), op.pick);
            break;
          case 'decode':
            for (let i = 0; i < op.steps; i++) {
              both((p, s) => {
                if (s.numBlocks === 0) return 'idle';
                s.appendToken(7000 + i);
                s.kvCachedTokens = s.numTokens - 1;
                return p.allocate(s, s.numTokens);
              }, op.pick);
            }
            break;
          case 'finish':
            both((p, s) => (op.withoutCache ? p.deallocateWithoutCache(s) : p.deallocate(s)), op.pick);
            break;
          case 'fork': {
            const [a, b] = seqs[op.pick % seqs.length]!;
            if (a.dpRank >= 0) seqs.push([a.fork(), b.fork()]);
            break;
          }
        }
      }
      if (atRelease) seen.offloaded += flushBoth();
      compare();
    }
    for (const [a, b] of seqs) {
      plan.deallocate(a);
      now.deallocate(b);
      if (atRelease) seen.offloaded += flushBoth();
    }
    seen.offloaded += flush();
    compare();
    seen.loaded += now.hierarchyStats().reduce((x, s) => x + s.blocksLoaded, 0);
    expect(now.hostNumUsedBlocks().every((u) => u === 0)).toBe(true);
  } finally {
    plan.dispose();
    now.dispose();
  }
}

/** A prompt finishes, the host takes its blocks, the device forgets them and the prompt comes back: every run starts with loads. */
const warmUp: Op[] = [
  { kind: 'new', prompt: 0, len: 20 },
  { kind: 'allocate', pick: 0 },
  { kind: 'finish', pick: 0, withoutCache: false },
  { kind: 'flush', evict: 30 },
  { kind: 'new', prompt: 0, len: 20 },
];

/** run() on random operations, pools and event recording (after warmUp). */
function runRandom(atRelease: boolean): void {
  fc.assert(
    fc.property(
      fc.array(opArb, { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 6, max: 24 }),
      fc.integer({ min: 8, max: 40 }),
      fc.integer({ min: 1, max: 2 }),
      fc.boolean(),
      (ops, numBlocks, hostNumBlocks, dpSize, events) => run([...warmUp, ...ops], numBlocks, hostNumBlocks, dpSize, events, atRelease),
    ),
    { numRuns: soak(150) },
  );
}

describe('completeTransfersNow', () => {
  it('leaves the state completing every taken plan leaves, on random operations', () => {
    runRandom(false);
    expect(seen.offloaded).toBeGreaterThan(0);
    expect(seen.loaded).toBeGreaterThan(0);
  });

  it('with offloads completed within each release, leaves the state completing them after every operation leaves', () => {
    const before = { ...seen };
    runRandom(true);
    expect(seen.offloaded).toBeGreaterThan(before.offloaded);
    expect(seen.loaded).toBeGreaterThan(before.loaded);
  });

  it('drops pending loads, keeps plans already taken in flight, and counts the blocks it offloads', () => {
    const p = new HierarchyBlockManagerPool({ numBlocks: 8, blockSize: 4, hostNumBlocks: 16 });
    const a = new Sequence(promptTokens(2, 13));
    expect(p.allocate(a)).toBe(true);
    a.kvCachedTokens = a.numTokens;
    p.deallocate(a);
    const [taken] = p.takeTransfers();
    expect(taken!.offload!.blocks).toHaveLength(3);
    const b = new Sequence(promptTokens(3, 9));
    expect(p.allocate(b)).toBe(true);
    b.kvCachedTokens = b.numTokens;
    p.deallocate(b);
    expect(p.completeTransfersNow()).toBe(2);
    expect(p.hasPendingTransfers()).toBe(false);
    expect(p.offloadsInFlight()).toEqual([taken!.offload]);
    expect(p.hierarchyStats()[0]!.offloadBlocksInFlight).toBe(3);
    p.completeOffload(taken!.offload!);
    // Both prompts' full blocks are in the host cache now.
    expect(p.hostNumBlocksInPrefixCache()).toEqual([5]);
    // A prompt the device forgot loads from the host: the load plan is dropped, nothing stays pending.
    p.managers[0]!.evict(100);
    const c = new Sequence(promptTokens(2, 13));
    expect(p.allocate(c)).toBe(true);
    expect(p.hostKvCachedTokens(c)).toBe(12);
    expect(p.hasPendingTransfers()).toBe(true);
    expect(p.completeTransfersNow()).toBe(0);
    expect(p.hasPendingTransfers()).toBe(false);
    expect(p.takeTransfers()[0]!.loads).toEqual([]);
    p.check();
    expect(() => p.completeTransfersNow(42 as never)).toThrow(/onOffload must be a function, got 42/);
    p.dispose();
    expect(() => p.completeTransfersNow()).toThrow();
  });
});

describe('releaseOffloadNow (the core call behind it)', () => {
  it('refuses a table with an id out of range, free or not held, or a manager recording events, and changes nothing', () => {
    const device = new BlockManagerImpl({ numBlocks: 16, blockSize: 4 });
    const host = new BlockManagerImpl({ numBlocks: 16, blockSize: 4 });
    try {
      const dev = Int32Array.from(device.allocate(3)!);
      const held = Int32Array.from(host.allocate(1)!);
      const freeDev = device.allocate(1)!;
      device.deallocate(freeDev);
      const figures = () => [device.stats(), host.stats(), device.holderCounts(), host.holderCounts()];
      const before = figures();
      const cases: Array<[Int32Array, Int32Array, number]> = [
        [Int32Array.from([dev[0]!, 16, dev[2]!]), held, ERR_OUT_OF_RANGE],
        [Int32Array.from([dev[0]!, 0, dev[2]!]), held, ERR_PADDING],
        [Int32Array.from([dev[0]!, freeDev[0]!, dev[2]!]), held, ERR_NOT_HELD],
        [dev, Int32Array.from([held[0]! + 1]), ERR_NOT_HELD],
      ];
      for (const [d, h, code] of cases) {
        expect(device.releaseOffloadNow(host, d, 3, h, 1, 0, 3)).toBe(code);
        expect(figures()).toEqual(before);
      }
      for (const m of [device, host]) {
        m.recordEvents(true);
        expect(device.releaseOffloadNow(host, dev, 3, held, 1, 0, 3)).toBe(ERR_EVENTS_ON);
        expect(figures()).toEqual(before);
        m.recordEvents(false);
      }
      // A host manager of another core instance, or a disposed one: refused before the core is called.
      const foreign = new ConcurrentBlockManagerImpl({ numBlocks: 16, blockSize: 4 });
      const gone = new BlockManagerImpl({ numBlocks: 16, blockSize: 4 });
      gone.dispose();
      try {
        expect(() => device.releaseOffloadNow(foreign as unknown as BlockManagerImpl, dev, 3, held, 1, 0, 3)).toThrow(/belongs to another core instance/);
        expect(() => device.releaseOffloadNow(gone, dev, 3, held, 1, 0, 3)).toThrow(/was disposed/);
      } finally {
        foreign.dispose();
      }
      expect(figures()).toEqual(before);
      // The same tables accepted: the device's 3 computed blocks are not cached, so none moves; all are given back.
      expect(device.releaseOffloadNow(host, dev, 3, held, 1, 0, 3)).toBe(0);
      expect(device.numUsedBlocks()).toBe(0);
      expect(host.numUsedBlocks()).toBe(0);
      device.check();
      host.check();
    } finally {
      device.dispose();
      host.dispose();
    }
  });
});
