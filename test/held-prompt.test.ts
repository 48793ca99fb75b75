// The replay's prompts held in the core's staging memory: the core writes a
// prompt once, and the pool's stagings of it read that copy instead of
// copying the tokens in again -- only while the promise that nothing writes
// them holds. runReplay's own loop keeps each prompt in the core only, from
// admission to deallocation.

import fc from 'fast-check';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadCore, plainCore } from '../bindings/core/plain-core.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { HierarchyReplayTarget } from '../bindings/replay/hierarchy-replay.js';
import type { KVEvent } from '../bindings/managers/kv-events.js';
import type { Sequence } from '../bindings/pool/sequence.js';
import {
  OUTPUT_BASE, OUTPUT_LAST, holdPromptTokens, keepPromptTokens, nextOutputToken, outputToken, promptTokens, promptTokensJs, releasePromptTokens,
  type ReplayParams, type ReplayTarget,
} from '../bindings/replay/kernel.js';
import { LinearStateReplayTarget } from '../bindings/replay/linear-state-target.js';
import { PoolReplayTarget } from '../bindings/replay/replay.js';
import { ReplayStepper, runReplay } from '../bindings/replay/stepper.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { targetWithout } from './support/target-without.js';
import { generateWorkload } from '../bindings/replay/workload.js';

beforeAll(async () => {
  await loadCore();
});

// A failed test may leave holds behind; the next starts without them (each checks its own).
afterEach(() => {
  staging().dropPrompts();
});

const staging = () => plainCore().staging;
const staged = (ptr: number, n: number) => [...plainCore().i32.subarray(ptr >>> 2, (ptr >>> 2) + n)];
const req = (first: number, inputLength: number): TraceRequest => ({
  timestamp: 0, inputLength, outputLength: 4, hashIds: Int32Array.from({ length: Math.ceil(inputLength / 512) }, (_, i) => first + i),
});

describe('Staging.holdPrompt', () => {
  it('stages the held prompt in place, and copies what lies outside it, another array, or after dropPrompt', () => {
    const t = new Int32Array(2000);
    holdPromptTokens(req(7, 1500), t);
    const expected = [...t.subarray(0, 1500)];
    const at = staging().stageTokens(t, 0, 1500);
    expect(staged(at, 1500)).toEqual(expected);
    // Written behind the promise's back, the array differs from the held copy: a staging inside it reads the copy.
    t[100] = -1;
    expect(staging().stageTokens(t, 96, 112)).toBe(at + 96 * 4);
    expect(staged(staging().stageTokens(t, 96, 112), 16)).toEqual(expected.slice(96, 112));
    // Another array is copied, and the hold stays.
    const other = Int32Array.from({ length: 64 }, (_, i) => i);
    expect(staged(staging().stageTokens(other, 0, 64), 64)).toEqual([...other]);
    expect(staging().stageTokens(t, 0, 16)).toBe(at);
    // Past the held tokens the array's own are copied in behind them.
    t[1550] = -2;
    const past = staging().stageTokens(t, 96, 1600); // the area grows (it was made for 1500)
    expect(staged(past, 1504)).toEqual([...expected.slice(96), ...t.subarray(1500, 1600)]);
    // Starting past them, the array is copied as any other.
    expect(staged(staging().stageTokens(t, 1500, 1600), 100)).toEqual([...t.subarray(1500, 1600)]);
    releasePromptTokens(t);
    expect(staging().heldPrompts).toBe(0);
    expect(staged(staging().stageTokens(t, 96, 112), 16)).toEqual([...t.subarray(96, 112)]);
  });

  it('holds several prompts at once, each ended on its own', () => {
    const a = new Int32Array(1100);
    const b = new Int32Array(2100);
    keepPromptTokens(req(11, 1024), a, 1100, OUTPUT_BASE);
    keepPromptTokens(req(50, 2048), b, 2100, OUTPUT_BASE);
    expect(staging().heldPrompts).toBe(2);
    expect(staged(staging().stageTokens(a, 0, 1024), 1024)).toEqual([...promptTokensJs(req(11, 1024))]);
    expect(staged(staging().stageTokens(b, 512, 2048), 1536)).toEqual([...promptTokensJs(req(50, 2048)).subarray(512)]);
    releasePromptTokens(a);
    expect(staging().heldPrompts).toBe(1);
    a.fill(4);
    expect(staged(staging().stageTokens(a, 0, 16), 16)).toEqual(Array(16).fill(4));
    expect(staged(staging().stageTokens(b, 0, 16), 16)).toEqual([...promptTokensJs(req(50, 2048)).subarray(0, 16)]);
    releasePromptTokens(b);
    expect(staging().heldPrompts).toBe(0);
  });

  it('keepPromptTokens writes the prompt and its outputs into the core only, whatever its length', () => {
    const t = new Int32Array(1600).fill(-9);
    const first = outputToken(5, 0);
    expect(keepPromptTokens(req(21, 1500), t, 1600, first)).toBe(true);
    expect([...t]).toEqual(Array(1600).fill(-9));
    const outputs = (from: number, n: number) => Array.from({ length: n - 1 }, () => (from = nextOutputToken(from)));
    const whole = (r: TraceRequest, from: number) => [...promptTokensJs(r), from, ...outputs(from, r.outputLength)];
    expect(staged(staging().stageTokens(t, 0, 1504), 1504)).toEqual(whole(req(21, 1500), first));
    // A short prompt too; outputs that reach the last output token go on from the first.
    keepPromptTokens(req(22, 300), t, 1600, OUTPUT_LAST - 1);
    expect(staging().heldPrompts).toBe(1);
    expect([...t]).toEqual(Array(1600).fill(-9));
    expect(staged(staging().stageTokens(t, 0, 304), 304)).toEqual(whole(req(22, 300), OUTPUT_LAST - 1));
    expect(staged(staging().stageTokens(t, 300, 304), 4)).toEqual([OUTPUT_LAST - 1, OUTPUT_LAST, OUTPUT_BASE, OUTPUT_BASE + 1]);
    // Bad arguments throw before the hold changes.
    const bad: [TraceRequest, number, number][] = [
      [req(22, 1500), -1, first], // no room
      [req(22, 1500), 1503, first], // less than prompt and outputs
      [req(22, 1500), 1601, first], // more than the array holds
      [req(22, 1500), 1600, OUTPUT_BASE - 1], // not an output token
      [{ ...req(22, 1500), outputLength: -1 }, 1600, first],
    ];
    for (const [r, room, from] of bad) {
      expect(() => keepPromptTokens(r, t, room, from)).toThrow(RangeError);
      expect(staging().heldPrompts).toBe(1);
      expect(staged(staging().stageTokens(t, 0, 304), 304)).toEqual(whole(req(22, 300), OUTPUT_LAST - 1));
    }
    releasePromptTokens(t);
  });

  it('keeps the held prompt when tokens staged past it need a larger area', () => {
    const t = new Int32Array(1 << 13);
    for (let i = 0; i < t.length; i++) t[i] = -i;
    keepPromptTokens(req(31, 1024), t, 1028, OUTPUT_BASE);
    const prompt = [...promptTokensJs(req(31, 1024)), OUTPUT_BASE, OUTPUT_BASE + 1, OUTPUT_BASE + 2, OUTPUT_BASE + 3];
    const at = staging().stageTokens(t, 0, t.length);
    expect(staged(at, t.length)).toEqual([...prompt, ...[...t.subarray(1028)]]);
    expect(staged(staging().stageTokens(t, 1000, 1030), 30)).toEqual([...prompt.slice(1000), ...t.subarray(1028, 1030)]);
    releasePromptTokens(t);
  });

  it('is never taken by the public promptTokens: its buffer is copied at every staging', () => {
    const t = new Int32Array(1500);
    promptTokens(req(9, 1500), t);
    t[3] = -7;
    expect(staged(staging().stageTokens(t, 0, 16), 16)).toEqual([...t.subarray(0, 16)]);
  });

  it('ends when the same buffer is filled with another prompt, held or not', () => {
    const t = new Int32Array(3000);
    holdPromptTokens(req(3, 2048), t);
    promptTokens(req(40, 2048), t); // a recycled buffer: the next request's prompt, not held
    const b = promptTokensJs(req(40, 2048));
    expect(staged(staging().stageTokens(t, 0, 2048), 2048)).toEqual([...b]);
    holdPromptTokens(req(3, 600), t);
    promptTokens(req(90, 300), t); // short prompts are written in JS
    expect(staged(staging().stageTokens(t, 0, 300), 300)).toEqual([...promptTokensJs(req(90, 300))]);
  });
});

describe('the ring of held prompts', () => {
  // Holds made, ended (oldest first mostly, as the replay does, or any) and
  // staged with tokens past them, many at once: the ring wraps, grows with
  // live holds in it, and moves a hold whose tokens outgrow its room. Every
  // staging must give the held tokens, then the array's.
  type Op = { kind: 'hold'; n: number; room: number } | { kind: 'drop'; pick: number } | { kind: 'stage'; pick: number; from: number; past: number };
  // Sizes whose holds (with the gap before each) fill the first ring exactly, to meet its edges, and any.
  const holdSize = fc.oneof(fc.constantFrom(508, 1020, 2044, 4092), fc.integer({ min: 1, max: 6000 }));
  const op = fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('hold' as const), n: holdSize, room: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 8000 })) }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('drop' as const), pick: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat(40) }) }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('stage' as const), pick: fc.nat(40), from: fc.nat(30000), past: fc.nat(9000) }) },
  );

  it('meets the ring\'s edges exactly: fills it, wraps at its start, grows when a hold would pass an edge', () => {
    // With the first ring's 64 KiB and 16 bytes before each hold, 1020 tokens take 4096 bytes: 16 fill it.
    const holds: Int32Array[] = [];
    const hold = (n: number) => {
      const t = new Int32Array(n);
      const p = staging().holdPrompt(t, n);
      plainCore().i32.fill(holds.length + 1, p >>> 2, (p >>> 2) + n);
      holds.push(t);
      staging().checkHeld();
    };
    const intact = () => holds.forEach((t, i) => {
      if (staging().heldPrompts > 0 && t.length > 0) {
        const at = staging().stageTokens(t, 0, t.length);
        if (plainCore().i32.subarray(at >>> 2, (at >>> 2) + t.length).some((v) => v !== i + 1)) throw new Error(`hold ${i} was overwritten`);
      }
    });
    // Tests share the core's staging: start each part on a first ring.
    staging().release();
    try {
      for (let i = 0; i < 15; i++) hold(1020);
      hold(1032); // 48 bytes past the end: the ring grows rather than write there
      intact();
      for (const t of holds) staging().dropPrompt(t);
      holds.length = 0;
      staging().release();
      for (let i = 0; i < 16; i++) hold(1020);
      staging().dropPrompt(holds[0]!);
      holds[0] = new Int32Array(0);
      hold(1028); // 32 bytes more than the oldest left free: no wrap over the next one
      intact();
      staging().dropPrompt(holds[1]!);
      holds[1] = new Int32Array(0);
      hold(1020);
      intact();
    } finally {
      staging().dropPrompts();
    }
  });

  it('gives every hold its own tokens through wraps, growth and moves', () => {
    let label = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 100, maxLength: 300 }), (ops: Op[]) => {
        const live: { array: Int32Array; n: number; held: number[] }[] = []; // oldest first
        try {
          for (const o of ops) {
            if (o.kind === 'hold') {
              const array = new Int32Array(o.n + 9000);
              for (let i = 0; i < array.length; i++) array[i] = -(label * 100000 + i);
              const held = Array.from({ length: o.n }, (_, i) => label * 100000 + i);
              label++;
              const p = staging().holdPrompt(array, o.n, o.room);
              plainCore().i32.set(held, p >>> 2);
              live.push({ array, n: o.n, held });
            } else if (o.kind === 'drop' && live.length > 0) {
              const [h] = live.splice(o.pick % live.length, 1);
              staging().dropPrompt(h!.array);
            } else if (o.kind === 'stage' && live.length > 0) {
              const h = live[o.pick % live.length]!;
              const start = o.from % h.n;
              const end = Math.min(h.array.length, h.n + o.past);
              const at = staging().stageTokens(h.array, start, end);
              const want = [...h.held.slice(start), ...h.array.subarray(h.n, end)];
              expect(staged(at, end - start)).toEqual(want);
            }
            expect(staging().heldPrompts).toBe(live.length);
            staging().checkHeld();
          }
          // Every live hold still gives its tokens after all that.
          for (const h of live) expect(staged(staging().stageTokens(h.array, 0, h.n), h.n)).toEqual(h.held);
        } finally {
          for (const h of live) staging().dropPrompt(h.array);
        }
        expect(staging().heldPrompts).toBe(0);
      }),
      { numRuns: 60 },
    );
  });
});

describe('the replay loop and held prompts', () => {
  const trace = generateWorkload({ requests: 150, seed: 3, concurrentChats: 4 });
  const params = { blockSize: 16, maxRunning: 6, publishAfterPrefill: false };

  /** The same target without holdsPrompt: every staging copies. */
  const copying = (t: ReplayTarget<Sequence>) => targetWithout(t, ['holdsPrompt', 'keepsPrompt']);

  /**
   * runReplay of the target `makeTarget` makes on `pool`, then pool.check(),
   * the holds back to what they were, and the pool disposed. `mostHeld`: the
   * most prompts the core held between two requests, beyond those held
   * before (another replay's, when this one runs in its progress callback).
   * `onStep` runs after each request and once at the end, before the checks.
   */
  const replayOn = <P extends BlockManagerPool>(
    pool: P, makeTarget: (pool: P) => ReplayTarget<Sequence>, p: ReplayParams = params, onStep: () => void = () => {},
  ) => {
    try {
      const heldBefore = staging().heldPrompts;
      let mostHeld = 0;
      const r = runReplay(makeTarget(pool), trace, p, () => {
        mostHeld = Math.max(mostHeld, staging().heldPrompts - heldBefore);
        onStep();
      });
      onStep();
      pool.check();
      expect(staging().heldPrompts).toBe(heldBefore);
      return { result: { ...r, seconds: 0, allocateCallsPerSecond: 0 }, mostHeld };
    } finally {
      pool.dispose();
    }
  };

  it('gives the ids, hits and evictions of a replay that copies every prompt', () => {
    // With linear state the prefill also stamps the prompt's hashes: a second staging of the whole prompt.
    for (const enableLinearState of [false, true]) {
      const run = (hold: boolean) => {
        const pool = new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true, enableLinearState, linearStateNumSlots: enableLinearState ? 8 : undefined });
        return replayOn(pool, (pool) => {
          const base = new PoolReplayTarget(pool);
          const t: ReplayTarget<Sequence> = enableLinearState ? new LinearStateReplayTarget(base, (s) => s) : base;
          expect(t.holdsPrompt).toBe(true);
          return hold ? t : copying(t);
        }).result;
      };
      const held = run(true);
      expect(held.matchedBlocks).toBeGreaterThan(0);
      expect(held.evictedBlocks).toBeGreaterThan(0);
      expect(held).toEqual(run(false));
    }
  });

  describe('runReplay keeps each prompt in the core only', () => {
    type Config = { evictionPolicy?: 'lru' | 'lfu' | 'priority'; dpSize?: number; publishAfterPrefill?: boolean };
    const configs: Config[] = [{}, { publishAfterPrefill: true }, { evictionPolicy: 'lfu' }, { evictionPolicy: 'priority', publishAfterPrefill: true }, { dpSize: 2 }];
    /** A replay of configuration `c` on a fresh pool, its target wrapped by `wrap`. */
    const run = (c: Config, wrap: (t: ReplayTarget<Sequence>) => ReplayTarget<Sequence>) =>
      replayOn(
        new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true, evictionPolicy: c.evictionPolicy, dpSize: c.dpSize }),
        (pool) => wrap(new PoolReplayTarget(pool, c.evictionPolicy === 'priority' ? 10 : undefined)),
        { ...params, publishAfterPrefill: c.publishAfterPrefill === true },
      );

    it('with the ids, hits and evictions of a replay that holds prompts only for the prefill, or copies them', () => {
      for (const c of configs) {
        const kept = run(c, (t) => t);
        expect(kept.mostHeld).toBeGreaterThan(1);
        expect(kept.result.matchedBlocks).toBeGreaterThan(0);
        expect(kept.result.evictedBlocks).toBeGreaterThan(0);
        const heldOnly = run(c, (t) => targetWithout(t, ['keepsPrompt']));
        expect(heldOnly.mostHeld).toBe(0);
        expect(kept.result).toEqual(heldOnly.result);
        expect(kept.result).toEqual(run(c, copying).result);
      }
    });

    it('with each sequence\'s outputs in the core only too, and not without advanceOutputs', () => {
      // At deallocation a kept sequence's stagings give its prompt and outputs whatever its buffer holds.
      const watched = (t: ReplayTarget<Sequence>, seen: { kept: number; copied: number }) => {
        const running = new Map<Sequence, TraceRequest>();
        let next = 0;
        return {
          ...targetWithout(t, []),
          newSequence: (buffer: Int32Array, promptLength: number) => {
            const s = t.newSequence(buffer, promptLength);
            running.set(s, trace[next++]!);
            return s;
          },
          deallocate: (s: Sequence) => {
            const r = running.get(s)!;
            running.delete(s);
            const n = s.numTokens;
            let token = outputToken(trace.indexOf(r), 0);
            const want = [...promptTokensJs(r)];
            while (want.length < n) { want.push(token); token = nextOutputToken(token); }
            // The array the prompt is held by (s.tokens is a new view). With
            // its tokens overwritten, a kept sequence's stagings still give
            // them; a copied one's give what the array holds.
            const buffer = s.state.tokens;
            const own = [...buffer.subarray(0, n)];
            buffer.fill(-5, 0, n);
            const got = staged(staging().stageTokens(buffer, 0, n), n);
            buffer.set(own);
            if (got.join() === want.join()) seen.kept++;
            else {
              expect(own).toEqual(want);
              seen.copied++;
            }
            t.deallocate(s);
          },
        } as ReplayTarget<Sequence>;
      };
      const seen = { kept: 0, copied: 0 };
      const kept = run({}, (t) => watched(t, seen));
      expect(seen.kept).toBe(trace.length - kept.result.rejected);
      expect(seen.copied).toBe(0);
      const without = { kept: 0, copied: 0 };
      const r = run({}, (t) => watched(targetWithout(t, ['advanceOutputs']), without));
      expect(r.mostHeld).toBe(0);
      expect(without.copied).toBe(trace.length - r.result.rejected);
      expect(r.result).toEqual(kept.result);
    });

    it('on a host-tier pool too, its stored events (their tokens read through the core) included', () => {
      const run = (wrap: (t: ReplayTarget<Sequence>) => ReplayTarget<Sequence>, events: boolean) => {
        const pool = new HierarchyBlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true, hostNumBlocks: 3000 });
        if (events) pool.recordEvents(true);
        const seen: KVEvent[] = [];
        let host = pool.hierarchyStats()[0]!;
        const r = replayOn(pool, (pool) => wrap(new HierarchyReplayTarget(pool)), params, () => {
          if (events) seen.push(...pool.drainEvents());
          host = pool.hierarchyStats()[0]!;
        });
        return { ...r, host, seen };
      };
      for (const events of [false, true]) {
        const kept = run((t) => t, events);
        expect(kept.mostHeld).toBeGreaterThan(1);
        expect(kept.host.blocksLoaded).toBeGreaterThan(0);
        expect(kept.host.blocksOffloaded).toBeGreaterThan(0);
        const copied = run(copying, events);
        expect(copied.mostHeld).toBe(0);
        expect(kept.result).toEqual(copied.result);
        expect(kept.host).toEqual(copied.host);
        if (events) {
          expect(kept.seen.filter((e) => e.type === 'stored' && e.medium === 'CPU').length).toBeGreaterThan(0);
          expect(kept.seen).toEqual(copied.seen);
        }
      }
    });

    it('but not on a pool whose managers stage into another core (thread-safe managers): the prompt is copied out', async () => {
      await ConcurrentBlockManagerImpl.ready();
      const run = (wrap: (t: ReplayTarget<Sequence>) => ReplayTarget<Sequence>) =>
        replayOn(new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true, enableDisaggPd: true }), (pool) => wrap(new PoolReplayTarget(pool)));
      const kept = run((t) => t);
      expect(kept.mostHeld).toBe(0);
      expect(kept.result.matchedBlocks).toBeGreaterThan(0);
      expect(kept.result).toEqual(run(copying).result);
    });

    it('but not in a stepper driven from outside: its sequences hold their prompts', () => {
      const pool = new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true });
      try {
        const stepper = new ReplayStepper(new PoolReplayTarget(pool), trace, params);
        let longPrompts = 0;
        for (let i = 0; i < 40; i++) {
          stepper.step();
          expect(staging().heldPrompts).toBe(0);
          const reqs = stepper.runningRequests();
          stepper.running().forEach((s, j) => {
            const r = trace[reqs[j]!]!;
            if (r.inputLength >= 512) longPrompts++;
            expect([...s.tokens.subarray(0, r.inputLength)]).toEqual([...promptTokensJs(r)]);
          });
        }
        expect(longPrompts).toBeGreaterThan(0);
      } finally {
        pool.dispose();
      }
    });

    it('and lets every prompt go when the target throws mid-replay', () => {
      const pool = new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true });
      try {
        const inner = new PoolReplayTarget(pool);
        let calls = 0;
        let mostHeld = 0;
        const target: ReplayTarget<Sequence> = {
          ...targetWithout(inner, []),
          keepsPrompt: true,
          deallocate: (s) => {
            mostHeld = Math.max(mostHeld, staging().heldPrompts);
            if (++calls === 20) throw new Error('target failed');
            inner.deallocate(s);
          },
        };
        expect(() => runReplay(target, trace, params)).toThrow('target failed');
        expect(mostHeld).toBeGreaterThan(1);
        expect(staging().heldPrompts).toBe(0);
      } finally {
        pool.dispose();
      }
    });

    it('while a replay run from another replay\'s progress callback keeps its own', () => {
      const alone = run({}, (t) => t).result;
      const pool = new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true });
      try {
        const inner: unknown[] = [];
        const r = runReplay(new PoolReplayTarget(pool), trace, params, (done) => {
          if (inner.length === 0 && done >= 20 && staging().heldPrompts > 0) {
            const outerHeld = staging().heldPrompts;
            inner.push(run({ dpSize: 2 }, (t) => t).result);
            expect(staging().heldPrompts).toBe(outerHeld);
          }
        });
        expect(inner).toEqual([run({ dpSize: 2 }, (t) => t).result]);
        expect({ ...r, seconds: 0, allocateCallsPerSecond: 0 }).toEqual(alone);
        expect(staging().heldPrompts).toBe(0);
      } finally {
        pool.dispose();
      }
    });
  });

  it('ends the promise when the target throws during the prefill', () => {
    const pool = new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true });
    try {
      const inner = new PoolReplayTarget(pool);
      let buffer: Int32Array = new Int32Array(0);
      const target: ReplayTarget<Sequence> = {
        ...copying(inner),
        holdsPrompt: true,
        newSequence: (b, n) => ((buffer = b), inner.newSequence(b, n)),
        allocate: () => {
          throw new Error('target failed');
        },
      };
      const long = { ...req(5, 1024) };
      expect(() => runReplay(target, [long], params)).toThrow('target failed');
      buffer[0] = 12345;
      expect(staged(staging().stageTokens(buffer, 0, 16), 1)).toEqual([12345]);
    } finally {
      pool.dispose();
    }
  });
});
