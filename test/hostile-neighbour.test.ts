// A hostile neighbour in the same process: every manager of a build lives in
// one Wasm linear memory, so a bad call on one object must never reach
// another's memory. Victim B runs random valid operations mirrored on the
// reference model; attacker A, in the same core instance, gets random
// operations mixed with bad inputs, impossible counts, dispose-then-use,
// stale handles and forged descriptors. After every step B's whole state
// equals the model's and check() passes on both.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { xxh3_128 } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { LinearStatePrefixCache } from '../bindings/linear-state/linear-state-prefix-cache.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { promptTokens } from '../bindings/replay/kernel.js';
import { ModelBlockManager } from '../model/block-manager-impl.js';

const B = 2;
const N = 24;

/** Prompts that share prefixes: a few roots, each extended by a few branches. */
function tokens(p: number, len: number): number[] {
  const root = p % 3;
  const branch = Math.floor(p / 3) % 4;
  return Array.from({ length: len }, (_, i) => (i < 6 ? root * 1000 + i : root * 1000 + branch * 100 + i));
}

type VictimOp =
  | { kind: 'allocate'; n: number }
  | { kind: 'release'; pick: number }
  | { kind: 'match'; prompt: number; len: number }
  | { kind: 'insert'; prompt: number; len: number }
  | { kind: 'evict'; n: number };

const victimOp: fc.Arbitrary<VictimOp> = fc.oneof(
  fc.record({ kind: fc.constant('allocate' as const), n: fc.integer({ min: 0, max: 4 }) }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('match' as const), prompt: fc.nat({ max: 11 }), len: fc.nat({ max: 14 }) }),
  fc.record({ kind: fc.constant('insert' as const), prompt: fc.nat({ max: 11 }), len: fc.nat({ max: 14 }) }),
  fc.record({ kind: fc.constant('evict' as const), n: fc.integer({ min: 0, max: 3 }) }),
);

/** The victim: a manager and its model twin, with the ids the test holds. */
class Victim {
  readonly model = new ModelBlockManager({ numBlocks: N, blockSize: B });
  readonly held: number[] = [];
  constructor(readonly core: BlockManagerImpl) {}

  apply(op: VictimOp): void {
    const { core, model, held } = this;
    switch (op.kind) {
      case 'allocate': {
        const a = core.allocate(op.n);
        const b = model.allocate(op.n);
        expect(a === null ? null : [...a]).toEqual(b);
        if (b) held.push(...b);
        break;
      }
      case 'release': {
        if (held.length === 0) break;
        const id = held.splice(op.pick % held.length, 1);
        core.deallocate(id);
        model.deallocate(id);
        break;
      }
      case 'match': {
        const t = tokens(op.prompt, op.len);
        const a = core.allocateShared(t);
        expect([...a]).toEqual(model.allocateShared(t));
        held.push(...a);
        break;
      }
      case 'insert': {
        const t = tokens(op.prompt, op.len);
        const fresh = model.allocate(Math.ceil(t.length / B));
        const freshCore = core.allocate(Math.ceil(t.length / B));
        expect(freshCore === null ? null : [...freshCore]).toEqual(fresh);
        if (fresh) {
          expect(core.cache(t, fresh)).toBe(model.cache(t, fresh));
          held.push(...fresh);
        }
        break;
      }
      case 'evict':
        expect(core.evict(op.n)).toBe(model.evict(op.n));
        break;
    }
  }

  /** The victim's whole state equals its model's, and the core audits clean. */
  compare(): void {
    const { core, model } = this;
    core.check();
    expect([...core.freeIds()]).toEqual(model.free);
    for (let id = 1; id < N; id++) expect(core.refCount(id)).toBe(model.ref[id]);
    expect([...core.lruOrder()]).toEqual(model.prefix.lruOrder());
    const s = core.stats();
    expect(s.numUsedBlocks).toBe(model.numUsedBlocks());
    expect(s.numBlocksInPrefixCache).toBe(model.numBlocksInPrefixCache());
    expect({
      matchCalls: s.matchCalls,
      blocksQueried: s.blocksQueried,
      blocksHit: s.blocksHit,
      blocksInserted: s.blocksInserted,
      blocksEvicted: s.blocksEvicted,
      blocksAllocated: s.blocksAllocated,
      allocationFailures: s.allocationFailures,
    }).toEqual(model.counters);
  }
}

type AttackOp =
  | { kind: 'valid'; op: VictimOp }
  | { kind: 'huge'; which: number }
  | { kind: 'badIds'; which: number }
  | { kind: 'disposeThenUse'; which: number }
  | { kind: 'events'; on: boolean }
  | { kind: 'bigHash'; bytes: number }
  | { kind: 'pool'; which: number }
  | { kind: 'stale'; which: number }
  | { kind: 'forge'; which: number };

const attackOp: fc.Arbitrary<AttackOp> = fc.oneof(
  { weight: 4, arbitrary: victimOp.map((op) => ({ kind: 'valid' as const, op })) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('huge' as const), which: fc.nat({ max: 7 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('badIds' as const), which: fc.nat({ max: 8 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('disposeThenUse' as const), which: fc.nat({ max: 9 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('events' as const), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bigHash' as const), bytes: fc.integer({ min: 1, max: 60_000 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('pool' as const), which: fc.nat({ max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('stale' as const), which: fc.nat({ max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('forge' as const), which: fc.nat({ max: 5 }) }) },
);

type Step = { who: 'A'; op: AttackOp } | { who: 'B'; op: VictimOp };
const steps = fc.array(
  fc.oneof(attackOp.map((op) => ({ who: 'A' as const, op })), victimOp.map((op) => ({ who: 'B' as const, op }))),
  { minLength: 50, maxLength: 250, size: 'max' },
);

/** Calls that must throw, and must not change anything while doing so. */
function throwsClearly(fn: () => unknown, pattern: RegExp): void {
  expect(fn).toThrow(pattern);
}

const DISPOSED = /was disposed/;

/** Every call on a disposed manager throws (a sample of them per step). */
function useDisposed(m: BlockManagerImpl, which: number): void {
  const calls: Array<() => unknown> = [
    () => m.allocate(1),
    () => m.deallocate([1]),
    () => m.numFreeBlocks(),
    () => m.numUsedBlocks(),
    () => m.numBlocksInPrefixCache(),
    () => m.stats(),
    () => m.allocateShared(tokens(0, 8)),
    () => m.cache(tokens(0, 4), [1, 2]),
    () => m.evict(3),
    () => m.drainEvents(),
    () => m.allocateStepsInto(2, new Int32Array(2), 0),
  ];
  throwsClearly(calls[which % calls.length]!, DISPOSED);
}

interface Attacker {
  a: BlockManagerImpl;
  held: number[];
  make(): BlockManagerImpl;
}

function attack(att: Attacker, op: AttackOp, victim: Victim, plain: boolean): void {
  const a = att.a;
  switch (op.kind) {
    case 'valid': {
      // The attacker's own valid traffic, unmirrored: it moves the allocator
      // and the shared staging areas under the victim.
      const o = op.op;
      if (o.kind === 'allocate') att.held.push(...(a.allocate(o.n) ?? []));
      else if (o.kind === 'release' && att.held.length > 0) a.deallocate(att.held.splice(o.pick % att.held.length, 1));
      else if (o.kind === 'match') att.held.push(...a.allocateShared(tokens(o.prompt + 1, o.len)));
      else if (o.kind === 'insert') {
        const t = tokens(o.prompt + 1, o.len);
        const ids = a.allocate(Math.ceil(t.length / B));
        if (ids) {
          a.cache(t, ids);
          att.held.push(...ids);
        }
      } else if (o.kind === 'evict') a.evict(o.n);
      break;
    }
    case 'huge': {
      // Counts that can never succeed answer null/0 or a clear error, staging nothing.
      const calls: Array<() => void> = [
        () => expect(a.allocate(2 ** 30)).toBeNull(),
        () => expect(a.allocate(2 ** 28)).toBeNull(),
        () => expect(a.allocate(N)).toBeNull(),
        () => throwsClearly(() => a.allocate(2 ** 31), /n must be at most 2147483647/),
        () => throwsClearly(() => a.allocate(2 ** 32 + 4), /n must be at most/),
        () => expect(a.evict(2 ** 31 - 1)).toBeGreaterThanOrEqual(0),
        () => {
          // Decode steps far past the manager's ids: what it has, then the step that fails.
          const ids = new Int32Array(N);
          const got = a.allocateStepsInto(2 ** 30, ids, 0);
          // The shared build's manager makes its steps one call at a time (-1: none made here).
          expect(got).toBeGreaterThanOrEqual(plain ? 0 : -1);
          expect(got).toBeLessThan(plain ? N : 0);
          att.held.push(...ids.subarray(0, Math.max(got, 0)));
        },
        () => throwsClearly(() => promptTokens({ inputLength: 2 ** 30 + 512, outputLength: 0, hashIds: new Int32Array(4) }), /inputLength must be in \[0, 268435456\]/),
        () => throwsClearly(() => a.allocateShared({ length: -1 } as never), /length must be a non-negative integer/),
      ];
      calls[op.which % calls.length]!();
      break;
    }
    case 'badIds': {
      const calls: Array<() => void> = [
        () => throwsClearly(() => a.deallocate([N + 5]), /out of range/),
        () => throwsClearly(() => a.deallocate([-1]), /out of range/),
        () => throwsClearly(() => a.deallocate([0]), /padding/),
        () => throwsClearly(() => a.retain([2 ** 31 - 1]), /out of range/),
        () => throwsClearly(() => a.deallocate({ length: 2 ** 40 } as never), /length must be a non-negative integer|must be an int32/),
        () => throwsClearly(() => a.cache([1, 2, 3, 4], [N + 1, N + 2]), /out of range/),
        () => throwsClearly(() => a.refCount(N), /id must be in/),
        () => throwsClearly(() => a.blockHash(-5), /id must be in/),
        () => throwsClearly(() => a.cacheByHashes([1], new Uint8Array(15)), /16 bytes per id/),
      ];
      calls[op.which % calls.length]!();
      break;
    }
    case 'disposeThenUse': {
      a.dispose();
      useDisposed(a, op.which);
      att.a = att.make();
      att.held.length = 0;
      break;
    }
    case 'events': {
      a.recordEvents(op.on);
      a.drainEvents();
      break;
    }
    case 'bigHash': {
      // Hashing stages its input in the plain core (the victim's memory too, for the plain build).
      const data = new Uint8Array(op.bytes).map((_, i) => i * 31);
      expect(xxh3_128(data).length).toBe(16);
      break;
    }
    case 'pool': {
      // A pool disposed while its sequences hold blocks: every later call
      // on it (or with its sequences) says so and touches nothing.
      if (!plain) break;
      const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, enableLinearState: op.which % 2 === 1 });
      const s = new Sequence(tokens(op.which, 7));
      expect(p.allocate(s)).toBe(true);
      p.dispose();
      const after: Array<() => unknown> = [() => p.deallocate(s), () => p.allocate(s), () => p.numFreeBlocks(), () => p.check()];
      throwsClearly(after[op.which % after.length]!, DISPOSED);
      const ls = new LinearStatePrefixCache({ numSlots: 4 });
      ls.dispose();
      throwsClearly(() => ls.acquireLiveSlot(), DISPOSED);
      break;
    }
    case 'stale': {
      // A handle attached to A, then A disposed by its creator: the handle
      // takes the header slot's lock, finds the generation changed, and
      // throws; the slot is then reused by the next manager made.
      if (plain) break;
      const view = ConcurrentBlockManagerImpl.attach((a as ConcurrentBlockManagerImpl).share());
      a.dispose();
      att.a = att.make();
      att.held.length = 0;
      const calls: Array<() => unknown> = [() => view.allocate(1), () => view.numFreeBlocks(), () => view.check(), () => view.deallocate([1])];
      throwsClearly(calls[op.which % calls.length]!, DISPOSED);
      expect((att.a as ConcurrentBlockManagerImpl).lockDepth()).toBe(0);
      break;
    }
    case 'forge': {
      // Descriptors naming something other than a live manager of that
      // generation are refused before anything is read through them.
      if (plain) break;
      const d = (a as ConcurrentBlockManagerImpl).share();
      const v = (victim.core as ConcurrentBlockManagerImpl).share();
      const forged = [
        { ...d, ptr: v.ptr },
        { ...d, gen: d.gen + 1 },
        { ...d, ptr: d.ptr + 4 },
        { ...d, ptr: d.ptr + 256 },
        { ...v, ptr: 64 },
        { ...d, gen: v.gen },
      ];
      throwsClearly(() => ConcurrentBlockManagerImpl.attach(forged[op.which % forged.length]!), /does not name a live manager/);
      break;
    }
  }
  if (!att.a.isDisposed) att.a.check();
}

function hostileRun(list: Step[], make: () => BlockManagerImpl, plain: boolean): number {
  const victim = new Victim(make());
  const att: Attacker = { a: make(), held: [], make };
  try {
    for (const step of list) {
      if (step.who === 'B') victim.apply(step.op);
      else attack(att, step.op, victim, plain);
      victim.compare();
    }
    return list.length;
  } finally {
    victim.core.dispose();
    att.a.dispose();
  }
}

describe('a hostile neighbour cannot reach another manager', () => {
  it('plain build: random operations, bad inputs, huge counts and dispose-then-use on A leave B exactly as the model says', () => {
    let total = 0;
    fc.assert(
      fc.property(steps, (list) => {
        total += hostileRun(list, () => new BlockManagerImpl({ numBlocks: N, blockSize: B }), true);
      }),
      { numRuns: 60 },
    );
    expect(total).toBeGreaterThan(60 * 50);
  });

  it('shared-memory build: the same, with stale attached handles and forged descriptors on A', () => {
    let total = 0;
    fc.assert(
      fc.property(steps, (list) => {
        total += hostileRun(list, () => new ConcurrentBlockManagerImpl({ numBlocks: N, blockSize: B }), false);
      }),
      { numRuns: 30 },
    );
    expect(total).toBeGreaterThan(30 * 50);
  });
});
