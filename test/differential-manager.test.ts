// Differential property test: random operation sequences on the Wasm core
// and on the reference model must agree step by step (returned ids, free
// stack, reference counts, LRU order, counters), with check() after each step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { SingleBlockManager } from '../bindings/managers/single-block-manager.js';
import { ModelBlockManager } from './model/block-manager-impl.js';
import { ModelSingleBlockManager } from './model/single-block-manager.js';

type Op =
  | { kind: 'allocate'; n: number }
  | { kind: 'release'; pick: number[] }
  | { kind: 'retain'; pick: number[] }
  | { kind: 'match'; prompt: number; len: number; existing: number }
  | { kind: 'insert'; prompt: number; len: number; existing: number; marks?: Mark[] }
  | { kind: 'evict'; n: number }
  | { kind: 'tick'; dt: number };

/** A retention range for the priority policy (Sequence.setRetention / cache's `retention`). */
type Mark = { start: number; end: number; priority: number; duration?: number };

// Weighted so that holders come and go often enough for hits and evictions
// to happen in most runs (releases outnumber allocations).
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('allocate' as const), n: fc.integer({ min: 0, max: 6 }) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('retain' as const), pick: fc.array(fc.nat(), { minLength: 1, maxLength: 2 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('match' as const), prompt: fc.nat({ max: 11 }), len: fc.nat({ max: 16 }), existing: fc.nat({ max: 2 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('insert' as const), prompt: fc.nat({ max: 11 }), len: fc.nat({ max: 16 }), existing: fc.nat({ max: 2 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('evict' as const), n: fc.integer({ min: 0, max: 4 }) }) },
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
      kind: fc.constant('insert' as const), prompt: fc.nat({ max: 11 }), len: fc.nat({ max: 16 }), existing: fc.nat({ max: 2 }),
      marks: fc.array(markArb, { maxLength: 2 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), dt: fc.nat({ max: 3 }) }) },
);

/** Prompts share prefixes: a few roots, each extended by a few branch tokens. */
function promptTokens(p: number, len: number): number[] {
  const root = p % 3;
  const branch = Math.floor(p / 3) % 4;
  const t: number[] = [];
  for (let i = 0; i < len; i++) t.push(i < 8 ? root * 1000 + i : root * 1000 + branch * 100 + i);
  return t;
}

function compare(core: BlockManagerImpl | SingleBlockManager, model: ModelBlockManager): void {
  core.check();
  expect([...core.freeIds()]).toEqual(model.free);
  for (let id = 1; id < model.numBlocks; id++) expect(core.refCount(id)).toBe(model.ref[id]);
  expect([...core.lruOrder()]).toEqual(model.prefix.lruOrder());
  const s = core.stats();
  expect(s.numUsedBlocks).toBe(model.numUsedBlocks());
  expect(s.numEvictableBlocks).toBe(model.numEvictableBlocks());
  expect(s.numBlocksInPrefixCache).toBe(model.numBlocksInPrefixCache());
  expect(s.peakUsedBlocks).toBe(model.peakUsed);
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

/**
 * Moves a core manager's recency clock (test hook): stamps are u32 and are
 * renumbered before the clock wraps, which the model never needs to do.
 */
function setClock(mgr: BlockManagerImpl, v: number): void {
  (mgr as unknown as { ex: { mgr_set_clock(m: number, v: number): void } }).ex.mgr_set_clock(mgr.ptr, v);
}

function run(
  ops: Op[], numBlocks: number, blockSize: number, single: boolean, Impl = BlockManagerImpl, evictionPolicy?: 'lfu' | 'priority',
  clockStart?: number,
): void {
  const core = single
    ? new SingleBlockManager({ numBlocks })
    : new Impl({ numBlocks, blockSize, ...(evictionPolicy && { evictionPolicy }) });
  if (clockStart !== undefined) setClock(core as BlockManagerImpl, clockStart);
  const model = single ? new ModelSingleBlockManager(numBlocks) : new ModelBlockManager({ numBlocks, blockSize, evictionPolicy });
  model.trackPeak = true;
  const B = core.blockSize;
  // Handles the test holds: one entry per reference it owns.
  const held: number[] = [];
  // Block tables of "sequences" the test built by matching and allocating.
  try {
    for (const op of ops) {
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
          const t = promptTokens(op.prompt, op.len);
          const full = Math.floor(t.length / B);
          const first = core.allocateShared(t.slice(0, Math.min(op.existing, full) * B));
          const firstM = model.allocateShared(t.slice(0, Math.min(op.existing, full) * B));
          expect([...first]).toEqual(firstM);
          const a = core.allocateShared(t, first);
          const b = model.allocateShared(t, firstM);
          expect([...a]).toEqual(b);
          held.push(...b, ...firstM);
          break;
        }
        case 'insert': {
          const t = promptTokens(op.prompt, op.len);
          const need = Math.ceil(t.length / B);
          // A sequence: its shared prefix from a match, then fresh blocks.
          const shared = model.prefixOn ? model.allocateShared(t.slice(0, Math.min(op.existing, Math.floor(t.length / B)) * B)) : [];
          const sharedCore = core.allocateShared(t.slice(0, Math.min(op.existing, Math.floor(t.length / B)) * B));
          expect([...sharedCore]).toEqual(shared);
          const fresh = model.allocate(need - shared.length);
          const freshCore = core.allocate(need - shared.length);
          expect(freshCore === null ? null : [...freshCore]).toEqual(fresh);
          const table = [...shared, ...(fresh ?? [])];
          if (fresh) {
            const marks = op.marks ?? [];
            const modelMarks = marks.map((m) => ({ ...m, duration: m.duration ?? Infinity }));
            expect(core.cache(t, table, shared.length, marks)).toBe(model.cache(t, table, shared.length, '', modelMarks));
          }
          held.push(...table);
          break;
        }
        case 'evict': {
          expect(core.evict(op.n)).toBe(model.evict(op.n));
          break;
        }
        case 'tick': {
          if (single) break;
          const c = core as BlockManagerImpl;
          c.setTime(c.time + op.dt);
          model.setTime(model.prefix.now + op.dt);
          break;
        }
      }
      compare(core, model);
    }
    // Let every holder go: everything ends free or cached, nothing used.
    core.deallocate(held);
    model.deallocate(held);
    compare(core, model);
    expect(core.numUsedBlocks()).toBe(0);
    expect(core.numFreeBlocks() + core.numBlocksInPrefixCache()).toBe(numBlocks - 1);
  } finally {
    core.dispose();
  }
}

describe('core vs reference model', () => {
  it('BlockManagerImpl agrees on random operation sequences', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, numBlocks, blockSize) => run(ops, numBlocks, blockSize, false),
      ),
      { numRuns: 300 },
    );
  });

  it('agrees when the u32 recency stamps run out and are renumbered mid-run (LRU and LFU)', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 40 }),
        fc.boolean(),
        (ops, numBlocks, blockSize, left, lfu) =>
          run(ops, numBlocks, blockSize, false, BlockManagerImpl, lfu ? 'lfu' : undefined, 0xffffffff - left),
      ),
      { numRuns: 200 },
    );
  });

  it('ConcurrentBlockManagerImpl (shared-memory core, one thread) agrees on random operation sequences', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, numBlocks, blockSize) => run(ops, numBlocks, blockSize, false, ConcurrentBlockManagerImpl),
      ),
      { numRuns: 150 },
    );
  });

  it('BlockManagerImpl with LFU eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, numBlocks, blockSize) => run(ops, numBlocks, blockSize, false, BlockManagerImpl, 'lfu'),
      ),
      { numRuns: 300 },
    );
  });

  it('ConcurrentBlockManagerImpl with LFU eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, numBlocks, blockSize) => run(ops, numBlocks, blockSize, false, ConcurrentBlockManagerImpl, 'lfu'),
      ),
      { numRuns: 100 },
    );
  });

  it('BlockManagerImpl with priority eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(
        fc.array(priorityOpArb, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, numBlocks, blockSize) => run(ops, numBlocks, blockSize, false, BlockManagerImpl, 'priority'),
      ),
      { numRuns: 300 },
    );
  });

  it('ConcurrentBlockManagerImpl with priority eviction agrees on random operation sequences', () => {
    fc.assert(
      fc.property(
        fc.array(priorityOpArb, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, numBlocks, blockSize) => run(ops, numBlocks, blockSize, false, ConcurrentBlockManagerImpl, 'priority'),
      ),
      { numRuns: 100 },
    );
  });

  it('SingleBlockManager agrees on random operation sequences', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 40 }), fc.integer({ min: 2, max: 12 }), (ops, n) =>
        run(ops, n, 1, true),
      ),
      { numRuns: 100 },
    );
  });
});
