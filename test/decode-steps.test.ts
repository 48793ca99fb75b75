// Decode steps that each need a block, made as one core call: the core's
// allocateSteps against as many one-block allocations, and the replay loop
// with decodeSteps against the loop that makes every call.

import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import type { EvictionPolicy } from '../bindings/managers/eviction-policy.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { mulberry32 } from '../bindings/replay/prng.js';
import { HierarchyReplayTarget } from '../bindings/replay/hierarchy-replay.js';
import { PoolReplayTarget } from '../bindings/replay/replay.js';
import { ReplayStepper } from '../bindings/replay/stepper.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { targetWithout } from './support/target-without.js';

const B = 4;

/** Two managers brought to the same state by the same random operations. */
function twins(seed: number, policy: EvictionPolicy): [BlockManagerImpl, BlockManagerImpl] {
  const make = () => new BlockManagerImpl({ numBlocks: 40, blockSize: B, evictionPolicy: policy });
  const pair: [BlockManagerImpl, BlockManagerImpl] = [make(), make()];
  for (const m of pair) {
    const rand = mulberry32(seed);
    const held: Int32Array[] = [];
    for (let op = 0; op < 60; op++) {
      const n = 1 + Math.floor(rand() * 6);
      const ids = m.allocate(n);
      if (ids === null) {
        if (held.length > 0) m.deallocate(held.shift()!);
        continue;
      }
      const tokens = Array.from({ length: n * B }, () => Math.floor(rand() * 50));
      if (rand() < 0.8) m.cache(tokens, ids);
      if (rand() < 0.6) m.deallocate(ids);
      else held.push(ids);
      if (rand() < 0.2 && held.length > 0) m.deallocate(held.shift()!);
    }
  }
  return pair;
}

describe('allocateStepsInto', () => {
  it('gives the ids, evictions and counters of as many one-block allocations, up to the first that fails', () => {
    let failures = 0;
    let evicting = 0;
    for (const policy of ['lru', 'lfu', 'priority'] as const) {
      for (let seed = 1; seed <= 40; seed++) {
        const k = 1 + (seed % 45);
        const [a, b] = twins(seed, policy);
        const viaSteps = new Int32Array(k + 2);
        const got = a.allocateStepsInto(k, viaSteps, 2);
        const one = new Int32Array(1);
        const viaCalls: number[] = [];
        for (let i = 0; i < k && b.allocateInto(1, one, 0); i++) viaCalls.push(one[0]!);
        expect(got, `${policy} seed ${seed}`).toBe(viaCalls.length);
        expect([...viaSteps.subarray(2, 2 + got)]).toEqual(viaCalls);
        expect(a.stats()).toEqual(b.stats());
        expect(a.holderCounts()).toEqual(b.holderCounts());
        expect(a.lruOrder()).toEqual(b.lruOrder());
        a.check();
        b.check();
        if (got < k) failures++;
        if (b.stats().blocksEvicted > 0) evicting++;
        a.dispose();
        b.dispose();
      }
    }
    // Both ends were reached: runs cut short by a failure, and runs that evicted.
    expect(failures).toBeGreaterThan(5);
    expect(evicting).toBeGreaterThan(5);
  });
});

describe('BlockManagerPool.decodeSteps', () => {
  it('refuses (-1) what it cannot make in one call, and changes nothing then', () => {
    const pool = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    const linear = new BlockManagerPool({ numBlocks: 32, blockSize: B, enableLinearState: true, linearStateNumSlots: 4 });
    const host = new HierarchyBlockManagerPool({ numBlocks: 32, blockSize: B, hostNumBlocks: 64 });
    try {
      const fresh = new Sequence([1, 2, 3, 4, 5]);
      expect(pool.decodeSteps(fresh, 1)).toBe(-1); // not placed
      const s = new Sequence([1, 2, 3, 4]);
      expect(pool.allocate(s)).toBe(true);
      expect(pool.decodeSteps(s, 0)).toBe(-1);
      expect(pool.decodeSteps(s, 1.5)).toBe(-1);
      expect(linear.decodeSteps(s, 1)).toBe(-1); // another pool's
      const l = new Sequence([1, 2, 3, 4]);
      expect(linear.allocate(l)).toBe(true);
      expect(linear.decodeSteps(l, 1)).toBe(-1);
      const h = new Sequence([1, 2, 3, 4]);
      expect(host.allocate(h)).toBe(true);
      expect(host.decodeSteps(h, 1)).toBe(-1); // in prefill: its next allocation may still match the host
      // The same with room in its last block: a step that fits is not one that needs nothing.
      const h2 = new Sequence([1, 2, 3, 4, 5]);
      expect(host.allocate(h2)).toBe(true);
      expect(host.decodeSteps(h2, 2)).toBe(-1);
      // A pending beam: the next allocation takes the source's blocks first.
      const src = new Sequence([9, 9]);
      expect(pool.allocate(src)).toBe(true);
      const child = new Sequence([1, 2, 3, 4, 5]);
      expect(pool.allocate(child)).toBe(true);
      pool.adoptBeam(child, src, { swapLastBlock: true });
      expect(pool.decodeSteps(child, 1)).toBe(-1);
      expect([...child.blockTable]).toHaveLength(2);
      pool.deallocate([child, src]);
      for (const [p, q] of [[pool, s], [linear, l], [host, h]] as const) {
        expect(q.numBlocks).toBe(1);
        p.check();
      }
      expect(h2.numBlocks).toBe(2);
      // Tokens past the blocks: a step could need more than one block.
      const past = new Sequence([1, 2, 3, 4]);
      expect(pool.allocate(past)).toBe(true);
      past.appendToken(5);
      past.appendToken(6);
      expect(pool.decodeSteps(past, 1)).toBe(-1);
      expect(past.numBlocks).toBe(1);
      // 4 tokens in one full block: steps 0, 4 and 8 of 9 need a block each.
      expect(pool.decodeSteps(s, 9)).toBe(9);
      expect(s.numBlocks).toBe(4);
      expect(s.numTokens).toBe(4); // the caller appends the tokens
      // Steps that fit need nothing.
      for (let t = 5; t <= 13; t++) s.appendToken(t);
      expect(pool.decodeSteps(s, 3)).toBe(3);
      expect(s.numBlocks).toBe(4);
      // Past what is free: the steps up to the one that fails.
      const free = pool.numFreeBlocks()[0]!;
      expect(pool.decodeSteps(s, 3 + (free + 2) * B)).toBe(3 + free * B);
      expect(s.numBlocks).toBe(4 + free);
      const failures = pool.managers[0]!.stats().allocationFailures;
      // A count far past what the rank has: the steps its blocks hold, one failure more, the table not sized for it.
      const room = s.numBlocks * B - s.numTokens;
      expect(pool.decodeSteps(s, 2 ** 40)).toBe(room);
      expect(pool.managers[0]!.stats().allocationFailures).toBe(failures + 1);
      expect(s.state.table.length).toBeLessThan(1024);
      pool.check();
    } finally {
      pool.dispose();
      linear.dispose();
      host.dispose();
    }
  });
});

describe('HierarchyBlockManagerPool.decodeSteps', () => {
  it('makes the steps of a sequence out of prefill as its allocate calls would, and refuses one owed a host load', () => {
    const make = () => new HierarchyBlockManagerPool({ numBlocks: 24, blockSize: B, hostNumBlocks: 64 });
    const [a, b] = [make(), make()];
    try {
      const prompt = Array.from({ length: 12 }, (_, i) => 100 + i); // 3 full blocks
      for (const p of [a, b]) {
        // Put the prompt's blocks on the host: computed, offloaded, completed.
        const first = new Sequence(prompt);
        expect(p.allocate(first)).toBe(true);
        first.kvCachedTokens = 12;
        p.deallocate(first);
        p.completeTransfersNow();
        p.resetPrefixCache();
      }
      const [sa, sb] = [new Sequence([...prompt, 7]), new Sequence([...prompt, 7])];
      // A chunked prefill that loads one of the three host blocks: two are still owed.
      expect(a.allocateChunked(sa, 13, 1)).toBe(true);
      expect(b.allocateChunked(sb, 13, 1)).toBe(true);
      expect(a.hierarchyStats()[0]!.blocksLoaded).toBe(1);
      expect(a.decodeSteps(sa, 5)).toBe(-1);
      expect(sa.numBlocks).toBe(4);
      expect(a.hierarchyStats()[0]!.blocksLoaded).toBe(1);
      // The loads done and the prompt computed: steps need device blocks only.
      for (const [p, s] of [[a, sa], [b, sb]] as const) {
        expect(p.allocateChunked(s, 13, 10)).toBe(true);
        s.kvCachedTokens = 13;
      }
      expect(a.hierarchyStats()[0]!.blocksLoaded).toBe(3);
      expect(a.decodeSteps(sa, 11)).toBe(11);
      expect(sa.numBlocks).toBe(6);
      for (let t = 14; t <= 24; t++) expect(b.allocate(sb, t)).toBe(true);
      expect([...sa.blockTable]).toEqual([...sb.blockTable]);
      expect(a.stats()).toEqual(b.stats());
      expect(a.hierarchyStats()).toEqual(b.hierarchyStats());
      a.check();
      b.check();
    } finally {
      a.dispose();
      b.dispose();
    }
  });
});

describe('PoolReplayTarget.decodeSteps', () => {
  it('refuses a bad argument by name and changes nothing', () => {
    const pool = new BlockManagerPool({ numBlocks: 16, blockSize: B });
    try {
      const t = new PoolReplayTarget(pool);
      const s = new Sequence([1, 2, 3, 4]);
      expect(pool.allocate(s)).toBe(true);
      const bad: Array<[unknown, unknown, RegExp]> = [
        [{}, 1, /^seq must be a Sequence, got/],
        [s, 0, /^steps must be in \[1, 268435456\], got 0/],
        [s, 2 ** 40, /^steps must be in \[1, 268435456\], got/],
        [s, 1.5, /^steps must be an integer/],
        [s, '2', /^steps must be a number/],
      ];
      for (const [seq, steps, message] of bad) {
        expect(() => t.decodeSteps(seq as Sequence, steps as number)).toThrow(message);
        expect(s.numBlocks).toBe(1);
        expect(pool.numFreeBlocks()).toEqual([14]);
      }
      expect(t.decodeSteps(s, 5)).toBe(5);
      expect(s.numBlocks).toBe(3);
      pool.check();
    } finally {
      pool.dispose();
    }
  });
});

describe('the replay loop with decodeSteps', () => {
  /** The target without decodeSteps: the loop makes every call that needs a block. */
  const stepByStep = (t: PoolReplayTarget) => targetWithout(t, ['decodeSteps']);

  it('gives what the loop that makes every call gives: ids, hits, evictions, truncations, calls, counters', () => {
    let truncated = 0;
    for (const [numBlocks, maxRunning, evictionPolicy, publishAfterPrefill] of [
      [600, 6, 'lru', false], [160, 4, 'lru', true], [90, 3, 'lfu', false], [120, 8, 'priority', false], [48, 2, 'lru', false], [48, 1, 'lfu', false],
    ] as const) {
      // Prompts of up to 44 blocks of 16 and up to 19 blocks of outputs: in 47 blocks a request alone may not finish.
      const trace = generateWorkload({ requests: 120, seed: numBlocks + maxRunning, concurrentChats: 4 }).map((r) => ({
        ...r, inputLength: Math.min(r.inputLength, 200 + (r.inputLength % 500)), outputLength: 1 + (r.outputLength % 300),
      }));
      const run = (batched: boolean) => {
        const pool = new BlockManagerPool({ numBlocks, blockSize: 16, evictionPolicy });
        try {
          const t = new PoolReplayTarget(pool, evictionPolicy === 'priority' ? 10 : undefined);
          const stepper = new ReplayStepper(batched ? t : stepByStep(t), trace, { blockSize: 16, maxRunning, publishAfterPrefill });
          while (stepper.step()) pool.check();
          const r = stepper.result();
          return { ...r, seconds: 0, allocateCallsPerSecond: 0, calls: (stepper as unknown as { allocateCalls: number }).allocateCalls, stats: pool.stats() };
        } finally {
          pool.dispose();
        }
      };
      const batched = run(true);
      expect(batched, `${numBlocks} blocks, ${evictionPolicy}`).toEqual(run(false));
      truncated += batched.truncated;
    }
    expect(truncated).toBeGreaterThan(0); // runs cut short by a failed step were among them
  });

  it('gives the same with the host tier: device and host counters, loads and offloads', () => {
    const trace = generateWorkload({ requests: 150, seed: 7, concurrentChats: 5 }).map((r) => ({
      ...r, inputLength: Math.min(r.inputLength, 100 + (r.inputLength % 400)), outputLength: 1 + (r.outputLength % 200),
    }));
    let loaded = 0;
    let made = 0;
    for (const [numBlocks, hostNumBlocks] of [[120, 400], [64, 96]] as const) {
      const run = (batched: boolean) => {
        const pool = new HierarchyBlockManagerPool({ numBlocks, blockSize: 16, hostNumBlocks });
        try {
          const t = new HierarchyReplayTarget(pool);
          const steps = t.decodeSteps.bind(t);
          // Count the runs made in one call (a run the pool refuses is made step by step).
          t.decodeSteps = (seq, k) => {
            const got = steps(seq, k);
            if (got > 0) made++;
            return got;
          };
          const stepper = new ReplayStepper(batched ? t : targetWithout(t, ['decodeSteps']), trace, { blockSize: 16, maxRunning: 4, publishAfterPrefill: false });
          while (stepper.step()) pool.check();
          const r = stepper.result();
          const calls = (stepper as unknown as { allocateCalls: number }).allocateCalls;
          return { ...r, seconds: 0, allocateCallsPerSecond: 0, calls, stats: pool.stats(), host: pool.hierarchyStats(), hostStats: pool.hostStats() };
        } finally {
          pool.dispose();
        }
      };
      const batched = run(true);
      expect(batched, `${numBlocks} / ${hostNumBlocks} blocks`).toEqual(run(false));
      loaded += batched.host[0]!.blocksLoaded;
    }
    expect(loaded).toBeGreaterThan(0);
    expect(made).toBeGreaterThan(100);
  });
});
