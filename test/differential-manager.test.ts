// Differential property test: random operation sequences of hundreds of
// steps on the Wasm core and on the reference model must agree step by step
// (returned ids, free stack, reference counts, LRU order, block states,
// stamped hashes, counters), with check() after each step. Invalid calls
// are part of the mix: both sides must refuse them with the same error class
// and leave the state exactly as it was.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockManagerImpl, ConcurrentBlockManagerImpl, SingleBlockManager } from '../bindings/index.js';
import { ModelBlockManager } from '../model/block-manager-impl.js';
import { modelRetentionRanges } from '../model/prefix-cache.js';
import { ModelSingleBlockManager } from '../model/single-block-manager.js';
import { agree } from './support/agree.js';
import { sameRefusal } from './support/same-outcome.js';
import { countSteps } from './support/steps.js';
import { soak } from './support/soak.js';

type Op =
  | { kind: 'allocate'; n: number }
  | { kind: 'release'; pick: number[] }
  | { kind: 'retain'; pick: number[] }
  | { kind: 'match'; prompt: number; len: number; existing: number }
  | { kind: 'insert'; prompt: number; len: number; existing: number; marks?: Mark[] }
  | { kind: 'evict'; n: number }
  | { kind: 'tick'; dt: number }
  | { kind: 'reset' }
  | { kind: 'rehash'; pick: number[]; keys: number[] }
  | { kind: 'bad'; which: number; pick: number };

/** A retention range for the priority policy (Sequence.setRetention / cache's `retention`). */
type Mark = { start: number; end: number; priority: number; duration?: number };

const BAD_CALLS = 18;

// Weighted so that holders come and go often enough for hits and evictions
// to happen in most runs (releases outnumber allocations).
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('allocate' as const), n: fc.integer({ min: 0, max: 6 }) }) },
  { weight: 10, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('retain' as const), pick: fc.array(fc.nat(), { minLength: 1, maxLength: 2 }) }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('match' as const), prompt: fc.nat({ max: 26 }), len: fc.nat({ max: 16 }), existing: fc.nat({ max: 2 }) }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('insert' as const), prompt: fc.nat({ max: 26 }), len: fc.nat({ max: 16 }), existing: fc.nat({ max: 2 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('evict' as const), n: fc.integer({ min: 0, max: 4 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'reset' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('rehash' as const),
      pick: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
      keys: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('bad' as const), which: fc.nat({ max: BAD_CALLS - 1 }), pick: fc.nat() }) },
);

// The priority policy's operations: inserts that mark token ranges (a few
// priorities, so ties happen) and clock ticks that end retentions.
const markArb: fc.Arbitrary<Mark> = fc
  .record({
    start: fc.nat({ max: 15 }),
    len: fc.integer({ min: 1, max: 16 }),
    priority: fc.constantFrom(0, 10, 35, 60, 100),
    duration: fc.option(fc.nat({ max: 4 }), { nil: undefined }),
  })
  .map(({ start, len, priority, duration }) => ({ start, end: start + len, priority, ...(duration !== undefined && { duration }) }));
const priorityOpArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 16, arbitrary: opArb },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('insert' as const), prompt: fc.nat({ max: 26 }), len: fc.nat({ max: 16 }), existing: fc.nat({ max: 2 }),
      marks: fc.array(markArb, { maxLength: 2 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), dt: fc.nat({ max: 3 }) }) },
);

/**
 * Prompts built from units of 4 tokens; unit j of prompt p has content
 * digit j of p in base 3 (p < 27, digits past the third are 0). Prompts with
 * equal leading digits share a prefix, and equal content follows different
 * prefixes all the time: only the hash chain keeps those blocks apart.
 */
function promptTokens(p: number, len: number): number[] {
  const t: number[] = [];
  for (let i = 0; i < len; i++) t.push(Math.floor(p / 3 ** Math.floor(i / 4)) % 3 * 1000 + (i % 4));
  return t;
}

/** A sequence of `n` operations, all generated (fast-check's default size would give a dozen). */
const opsOf = (arb: fc.Arbitrary<Op>, min: number, max: number) => fc.array(arb, { minLength: min, maxLength: max, size: 'max' });

/** What the runs exercised, so a test fails if its generator stops reaching these paths. */
const seen = { refusals: new Set<number>(), hits: 0, evictions: 0, failedAllocations: 0, rehashedNew: 0, resetEvicted: 0 };

const hex = (h: Uint8Array) => Buffer.from(h).toString('hex');

type AnyManager = BlockManagerImpl | SingleBlockManager;

/** Stamped hashes seen so far, in both forms: they must correspond one to one. */
class HashPairs {
  readonly toModel = new Map<string, string>();
  readonly toCore = new Map<string, string>();
  readonly list: Array<[Uint8Array, string]> = [];

  see(h: Uint8Array, key: string): void {
    const x = hex(h);
    const k = this.toModel.get(x);
    const c = this.toCore.get(key);
    if (k === undefined && c === undefined) {
      this.toModel.set(x, key);
      this.toCore.set(key, x);
      this.list.push([h, key]);
      return;
    }
    if (k !== key) expect(k, `core hash ${x}`).toBe(key);
    if (c !== x) expect(c, `model key ${key}`).toBe(x);
  }
}

function compare(core: AnyManager, model: ModelBlockManager, pairs: HashPairs): void {
  core.check();
  const n = model.numBlocks;
  agree(Array.from(core.freeIds()), model.free, 'free stack');
  agree(Array.from(core.holderCounts()), model.ref.map((r, id) => (id === 0 ? r : r - (model.isCached(id) ? 1 : 0))), 'holders');
  agree(Array.from(core.lruOrder()), model.prefix.lruOrder(), 'eviction order');
  agree(Array.from(core.blockStates()), model.blockStates(), 'block states');
  for (let id = 1; id < n; id++) {
    const h = core.blockHash(id);
    const k = model.stamp.get(id);
    if ((h === null) !== (k === undefined)) expect(h === null, `id ${id} carries a hash`).toBe(k === undefined);
    if (h !== null) pairs.see(h, k!);
  }
  const s = core.stats();
  const used = model.numUsedBlocks();
  agree(
    [s.numUsedBlocks, s.numFreeBlocks, s.numTotalBlocks, core.kvCacheUtilization(), s.numEvictableBlocks, s.numBlocksInPrefixCache, s.peakUsedBlocks],
    [used, model.free.length, n - 1, used / (n - 1), model.numEvictableBlocks(), model.numBlocksInPrefixCache(), model.peakUsed],
    'used, free, total, utilization, evictable, cached, peak',
  );
  agree(
    {
      matchCalls: s.matchCalls,
      blocksQueried: s.blocksQueried,
      blocksHit: s.blocksHit,
      blocksInserted: s.blocksInserted,
      blocksEvicted: s.blocksEvicted,
      blocksAllocated: s.blocksAllocated,
      allocationFailures: s.allocationFailures,
    },
    model.counters,
    'counters',
  );
}

/**
 * Moves a core manager's recency clock (test hook): stamps are u32 and are
 * renumbered before the clock wraps, which the model never needs to do.
 */
function setClock(mgr: BlockManagerImpl, v: number): void {
  (mgr as unknown as { ex: { mgr_set_clock(m: number, v: number): void } }).ex.mgr_set_clock(mgr.ptr, v);
}

/**
 * An invalid call, chosen by `which`, on both sides. `held` are the test's
 * references; `pick` chooses among candidate ids. Returns false when the
 * state offers no id for that kind of mistake.
 */
function badCall(core: AnyManager, model: ModelBlockManager, which: number, pick: number, held: number[], B: number): boolean {
  const n = model.numBlocks;
  const choose = (ids: number[]) => (ids.length === 0 ? undefined : ids[pick % ids.length]!);
  const freeId = choose(model.free) ?? n; // an id nobody holds, or one out of range
  const cachedOnly = choose(model.blockStates().flatMap((st, id) => (st === 3 ? [id] : [])));
  const heldId = choose(held);
  const plain = core instanceof BlockManagerImpl ? core : null;
  const t = promptTokens(pick % 27, 3 * B);
  switch (which) {
    case 0: sameRefusal(() => core.allocate(-1), () => model.allocate(-1)); break;
    case 1: sameRefusal(() => core.allocate(1.5), () => model.allocate(1.5)); break;
    case 2: sameRefusal(() => core.allocate('2' as never), () => model.allocate('2' as never)); break;
    case 3: sameRefusal(() => core.deallocate([pick % 2 === 0 ? 0 : freeId]), () => model.deallocate([pick % 2 === 0 ? 0 : freeId])); break;
    case 4:
      if (cachedOnly === undefined) return false;
      sameRefusal(() => core.deallocate([cachedOnly]), () => model.deallocate([cachedOnly]));
      break;
    case 5: {
      // One release more than the holders it has (the cache does not count).
      if (heldId === undefined) return false;
      const ids = new Array<number>(model.ref[heldId]! - (model.isCached(heldId) ? 1 : 0) + 1).fill(heldId);
      sameRefusal(() => core.deallocate(ids), () => model.deallocate(ids));
      break;
    }
    case 6: sameRefusal(() => core.retain([freeId]), () => model.retain([freeId])); break;
    case 7: sameRefusal(() => core.deallocate([1.5]), () => model.deallocate([1.5])); break;
    case 8: sameRefusal(() => core.evict(-1), () => model.evict(-1)); break;
    default: {
      if (!plain) return false; // the rest are calls of the prefix cache
      switch (which) {
        case 9: {
          const bad = [...t.slice(0, B), 2 ** 31];
          sameRefusal(() => plain.allocateShared(bad), () => model.allocateShared(bad));
          break;
        }
        case 10: {
          // More existing ids than full blocks.
          if (heldId === undefined) return false;
          const short = t.slice(0, B - 1 + (pick % 2));
          const ex = short.length >= B ? [heldId, heldId] : [heldId];
          sameRefusal(() => plain.allocateShared(short, ex), () => model.allocateShared(short, ex));
          break;
        }
        case 11: sameRefusal(() => plain.allocateShared(t, [freeId]), () => model.allocateShared(t, [freeId])); break;
        case 12: {
          if (heldId === undefined) return false;
          const ids = [heldId, freeId];
          sameRefusal(() => plain.cache(t, ids), () => model.cache(t, ids));
          break;
        }
        case 13: {
          if (heldId === undefined) return false;
          sameRefusal(() => plain.cache(t, [heldId], 2), () => model.cache(t, [heldId], 2));
          break;
        }
        case 14: {
          if (heldId === undefined) return false;
          const ids = [heldId, heldId, heldId, heldId]; // 3 full blocks hold at most 3 ids
          sameRefusal(() => plain.cache(t, ids), () => model.cache(t, ids));
          break;
        }
        case 15: {
          if (heldId === undefined) return false;
          sameRefusal(() => plain.cacheByHashes([heldId], new Uint8Array(15)), () => model.cacheByKeys([heldId], []));
          break;
        }
        case 16: {
          if (heldId === undefined) return false;
          const r = [{ start: 0, priority: 101 }];
          sameRefusal(() => plain.cache(t, [heldId], 0, r), () => model.cache(t, [heldId], 0, '', modelRetentionRanges(r)));
          break;
        }
        case 17: {
          const back = pick % 2 === 0 ? plain.time - 1 : Infinity;
          sameRefusal(() => plain.setTime(back), () => model.setTime(back));
          break;
        }
      }
    }
  }
  return true;
}

function run(
  ops: Op[], numBlocks: number, blockSize: number, single: boolean, Impl = BlockManagerImpl, evictionPolicy?: 'lfu' | 'priority',
  clockStart?: number,
  clockJumpAt = 0,
): void {
  const core = single
    ? new SingleBlockManager({ numBlocks })
    : new Impl({ numBlocks, blockSize, ...(evictionPolicy && { evictionPolicy }) });
  if (clockStart !== undefined && clockJumpAt === 0) setClock(core as BlockManagerImpl, clockStart);
  const model = single ? new ModelSingleBlockManager(numBlocks) : new ModelBlockManager({ numBlocks, blockSize, evictionPolicy });
  model.trackPeak = true;
  const plain = core instanceof BlockManagerImpl ? core : null;
  const B = core.blockSize;
  const pairs = new HashPairs();
  // Handles the test holds: one entry per reference it owns.
  const held: number[] = [];
  try {
    for (const [i, op] of ops.entries()) {
      // A jump of the clock mid-run meets a ring that wrapped, parked entries and a side heap.
      if (clockStart !== undefined && clockJumpAt > 0 && i === clockJumpAt) {
        setClock(core as BlockManagerImpl, clockStart);
        core.check();
      }
      switch (op.kind) {
        case 'allocate': {
          const a = core.allocate(op.n);
          const b = model.allocate(op.n);
          agree(a === null ? null : Array.from(a), b);
          if (b) held.push(...b);
          break;
        }
        case 'release': {
          if (held.length === 0) break;
          const idx = [...new Set(op.pick.map((p) => p % held.length))];
          const ids = idx.map((i) => held[i]!);
          core.deallocate(ids);
          model.deallocate(ids);
          idx.sort((x, y) => y - x).forEach((i) => held.splice(i, 1));
          break;
        }
        case 'retain': {
          if (held.length === 0) break;
          const ids = op.pick.map((p) => held[p % held.length]!);
          core.retain(ids);
          model.retain(ids);
          held.push(...ids);
          break;
        }
        case 'match': {
          if (!plain) break;
          const t = promptTokens(op.prompt, op.len);
          const full = Math.floor(t.length / B);
          const first = plain.allocateShared(t.slice(0, Math.min(op.existing, full) * B));
          const firstM = model.allocateShared(t.slice(0, Math.min(op.existing, full) * B));
          agree(Array.from(first), firstM);
          const a = plain.allocateShared(t, first);
          const b = model.allocateShared(t, firstM);
          agree(Array.from(a), b);
          held.push(...b, ...firstM);
          break;
        }
        case 'insert': {
          if (!plain) break;
          const t = promptTokens(op.prompt, op.len);
          const need = Math.ceil(t.length / B);
          // A sequence: its shared prefix from a match, then fresh blocks.
          const prefix = t.slice(0, Math.min(op.existing, Math.floor(t.length / B)) * B);
          const shared = model.allocateShared(prefix);
          agree(Array.from(plain.allocateShared(prefix)), shared);
          const fresh = model.allocate(need - shared.length);
          const freshCore = core.allocate(need - shared.length);
          agree(freshCore === null ? null : Array.from(freshCore), fresh);
          const table = [...shared, ...(fresh ?? [])];
          if (fresh) {
            const marks = op.marks ?? [];
            agree(plain.cache(t, table, shared.length, marks), model.cache(t, table, shared.length, '', modelRetentionRanges(marks)));
          }
          held.push(...table);
          break;
        }
        case 'evict':
          agree(core.evict(op.n), model.evict(op.n));
          break;
        case 'reset':
          const n = model.resetPrefixCache();
          agree(core.resetPrefixCache(), n);
          seen.resetEvicted += n;
          break;
        case 'rehash': {
          // Blocks copied in from elsewhere, cached under hashes seen before
          // (cached now, evicted since, or never cached under this id).
          if (!plain || held.length === 0 || pairs.list.length === 0) break;
          const ids = op.pick.map((p) => held[p % held.length]!);
          const keys = ids.map((_, i) => pairs.list[op.keys[i]! % pairs.list.length]!);
          const bytes = new Uint8Array(16 * ids.length);
          keys.forEach(([h], i) => bytes.set(h, 16 * i));
          const added = model.cacheByKeys(ids, keys.map(([, k]) => k));
          agree(plain.cacheByHashes(ids, bytes), added);
          seen.rehashedNew += added;
          break;
        }
        case 'tick': {
          if (!plain) break;
          plain.setTime(plain.time + op.dt);
          model.setTime(model.prefix.now + op.dt);
          break;
        }
        case 'bad':
          if (badCall(core, model, op.which, op.pick, held, B)) seen.refusals.add(op.which);
          break;
      }
      compare(core, model, pairs);
    }
    countSteps(ops.length);
    seen.hits += model.counters.blocksHit;
    seen.evictions += model.counters.blocksEvicted;
    seen.failedAllocations += model.counters.allocationFailures;
    agree(Array.from({ length: numBlocks }, (_, id) => core.refCount(id)), model.ref, 'reference counts');
    // Let every holder go: everything ends free or cached, nothing used.
    core.deallocate(held);
    model.deallocate(held);
    compare(core, model, pairs);
    expect(core.numUsedBlocks()).toBe(0);
    expect(core.numFreeBlocks() + core.numBlocksInPrefixCache()).toBe(numBlocks - 1);
  } finally {
    core.dispose();
  }
}

const shape = [fc.integer({ min: 2, max: 40 }), fc.integer({ min: 1, max: 4 })] as const;

describe('core vs reference model', () => {
  it('BlockManagerImpl agrees on random operation sequences', () => {
    fc.assert(
      fc.property(opsOf(opArb, 20, 500), ...shape, (ops, numBlocks, blockSize) => run(ops, numBlocks, blockSize, false)),
      { numRuns: soak(220) },
    );
    // Every kind of bad call was tried (and refused alike), and the paths that matter were reached.
    expect([...seen.refusals].sort((a, b) => a - b)).toEqual(Array.from({ length: BAD_CALLS }, (_, i) => i));
    for (const k of ['hits', 'evictions', 'failedAllocations', 'rehashedNew', 'resetEvicted'] as const) expect(seen[k], k).toBeGreaterThan(0);
  });

  it('agrees when the u32 recency stamps run out and are renumbered mid-run (LRU and LFU)', () => {
    fc.assert(
      fc.property(
        opsOf(opArb, 20, 400),
        ...shape,
        fc.integer({ min: 1, max: 40 }),
        fc.boolean(),
        fc.nat(),
        (ops, numBlocks, blockSize, left, lfu, at) =>
          run(ops, numBlocks, blockSize, false, BlockManagerImpl, lfu ? 'lfu' : undefined, 0xffffffff - left, at % (ops.length + 1)),
      ),
      { numRuns: soak(80) },
    );
  });

  it('ConcurrentBlockManagerImpl (shared-memory core, one thread) agrees on random operation sequences', () => {
    fc.assert(
      fc.property(opsOf(opArb, 20, 500), ...shape, (ops, numBlocks, blockSize) =>
        run(ops, numBlocks, blockSize, false, ConcurrentBlockManagerImpl),
      ),
      { numRuns: soak(40) },
    );
  });

  it('BlockManagerImpl with LFU eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(opsOf(opArb, 20, 500), ...shape, (ops, numBlocks, blockSize) =>
        run(ops, numBlocks, blockSize, false, BlockManagerImpl, 'lfu'),
      ),
      { numRuns: soak(80) },
    );
  });

  it('ConcurrentBlockManagerImpl with LFU eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(opsOf(opArb, 20, 400), ...shape, (ops, numBlocks, blockSize) =>
        run(ops, numBlocks, blockSize, false, ConcurrentBlockManagerImpl, 'lfu'),
      ),
      { numRuns: soak(25) },
    );
  });

  it('BlockManagerImpl with priority eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(opsOf(priorityOpArb, 20, 500), ...shape, (ops, numBlocks, blockSize) =>
        run(ops, numBlocks, blockSize, false, BlockManagerImpl, 'priority'),
      ),
      { numRuns: soak(80) },
    );
  });

  it('ConcurrentBlockManagerImpl with priority eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(opsOf(priorityOpArb, 20, 400), ...shape, (ops, numBlocks, blockSize) =>
        run(ops, numBlocks, blockSize, false, ConcurrentBlockManagerImpl, 'priority'),
      ),
      { numRuns: soak(25) },
    );
  });

  it('SingleBlockManager agrees on random operation sequences', () => {
    fc.assert(
      fc.property(opsOf(opArb, 20, 400), fc.integer({ min: 2, max: 12 }), (ops, n) => run(ops, n, 1, true)),
      { numRuns: soak(40) },
    );
  });
});
