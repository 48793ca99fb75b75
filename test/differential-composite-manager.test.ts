// Differential property tests of the standalone managers behind composite
// ranks: CompositeBlockManager (block tables of several sub-managers grown all
// or nothing, the window releasing slid-out blocks) and
// SlidingWindowBlockManager on its own. Hundreds of random operations per run
// on the Wasm core and on the model, compared after every step, bad calls
// included (refused with the same error class, nothing changed).

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CompositeBlockManager, SlidingWindowBlockManager, type CompositeBlockTables } from '../bindings/index.js';
import { ModelCompositeBlockManager, type ModelKind } from '../model/composite-block-manager.js';
import { ModelSlidingWindowBlockManager } from '../model/sliding-window-block-manager.js';
import { agree } from './support/agree.js';
import { sameRefusal } from './support/same-outcome.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

// ---- CompositeBlockManager ----

type CompositeOp =
  | { kind: 'new' }
  | { kind: 'allocate'; pick: number; tokens: number; cached: number }
  | { kind: 'slide'; pick: number; cached: number }
  | { kind: 'deallocate'; pick: number }
  | { kind: 'fork'; pick: number }
  | { kind: 'bad'; which: number; pick: number };

const compositeOpArb: fc.Arbitrary<CompositeOp> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'new' as const }) },
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat(), tokens: fc.nat({ max: 48 }), cached: fc.nat({ max: 48 }) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('slide' as const), pick: fc.nat(), cached: fc.nat({ max: 48 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('deallocate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bad' as const), which: fc.nat({ max: 5 }), pick: fc.nat() }) },
);

const layoutArb = fc
  .record({
    blockSize: fc.integer({ min: 1, max: 4 }),
    numBlocks: fc.integer({ min: 6, max: 40 }),
    subs: fc.array(fc.record({ window: fc.boolean(), ratio: fc.integer({ min: 0, max: 3 }) }), { minLength: 1, maxLength: 3 }),
    window: fc.integer({ min: 1, max: 14 }),
    maxSeqsPerBatch: fc.integer({ min: 0, max: 3 }),
    maxTokensPerBatch: fc.integer({ min: 0, max: 12 }),
  })
  .map((r) => ({
    blockSize: r.blockSize,
    numBlocks: r.numBlocks,
    kinds: r.subs.map((s) => (s.window ? 'sliding-window' : 'full') as ModelKind),
    ratios: r.subs.map((s) => (s.window ? s.ratio : Math.max(1, s.ratio))),
    window: r.window,
    maxSeqsPerBatch: r.maxSeqsPerBatch,
    maxTokensPerBatch: r.maxTokensPerBatch,
  }))
  .filter((L) => L.kinds.every((k, i) => k !== 'full' || Math.floor(L.numBlocks / L.ratios[i]!) >= 2));
type Layout = typeof layoutArb extends fc.Arbitrary<infer T> ? T : never;

const seen = { compositeRefusals: new Set<number>(), failures: 0, released: 0, swaRefusals: new Set<number>() };

function compareComposite(c: CompositeBlockManager, m: ModelCompositeBlockManager, sets: Array<[CompositeBlockTables, number[][]]>): void {
  c.check();
  agree(
    sets.map(([t]) => t.views().map((v) => Array.from(v))),
    sets.map(([, x]) => x),
    'tables',
  );
  const st = c.subManagerStats();
  agree(
    [c.subManagers.map((x) => Array.from(x.freeIds())), st.map((x) => x.peakUsedBlocks), st.map((x) => x.blocksReleasedOutOfWindow)],
    [m.subs.map((x) => x.free), m.peaks, m.releasedOut],
    'free stacks, peaks, released out of window',
  );
  const cap = m.subs[m.capacityIndex]!;
  agree(
    [c.capacityIndex, c.numFreeBlocks(), c.numUsedBlocks(), c.numTotalBlocks(), c.kvCacheUtilization()],
    [m.capacityIndex, cap.numFreeBlocks(), cap.numUsedBlocks(), cap.numBlocks - 1, cap.numUsedBlocks() / (cap.numBlocks - 1)],
    'capacity figures',
  );
}

function runComposite(L: Layout, ops: CompositeOp[]): void {
  const c = new CompositeBlockManager({
    blockSize: L.blockSize, numBlocks: L.numBlocks, managerTypes: L.kinds, compressRatios: L.ratios,
    // The window options only with a window sub-manager (elsewhere they are refused: they would do nothing).
    ...(L.kinds.includes('sliding-window') && { slidingWindowSize: L.window, maxSeqsPerBatch: L.maxSeqsPerBatch, maxTokensPerBatch: L.maxTokensPerBatch }),
  });
  const m = new ModelCompositeBlockManager(L);
  // A second manager, whose tables this one must refuse.
  const other = new CompositeBlockManager({ blockSize: 1, numBlocks: 4, managerTypes: ['full'] });
  const otherModel = new ModelCompositeBlockManager({ blockSize: 1, numBlocks: 4, kinds: ['full'] });
  const sets: Array<[CompositeBlockTables, number[][]]> = [];
  try {
    agree(c.specs.map((s) => [s.kind, s.blockSize, s.numBlocks]), m.specs.map((s) => [s.kind, s.blockSize, s.numBlocks]), 'layout');
    for (const op of ops) {
      if (op.kind === 'new') sets.push([c.newTables(), m.newTables()]);
      else if (op.kind === 'bad') {
        const [t, x] = sets.length > 0 ? sets[op.pick % sets.length]! : [c.newTables(), m.newTables()];
        const calls: Array<[() => unknown, () => unknown]> = [
          [() => c.allocate(t, -1), () => m.allocate(x, -1)],
          [() => c.allocate(t, 4, 1.5), () => m.allocate(x, 4, 1.5)],
          [() => c.allocate({} as never, 4), () => m.allocate({} as never, 4)],
          [() => c.deallocate(other.newTables()), () => m.deallocate(otherModel.newTables())],
          [() => c.releaseOutOfWindow(t, -1), () => m.releaseOutOfWindow(x, -1)],
          [() => c.fork(other.newTables()), () => m.fork(otherModel.newTables())],
        ];
        const [a, b] = calls[op.which]!;
        sameRefusal(a, b);
        seen.compositeRefusals.add(op.which);
      } else if (sets.length > 0) {
        const [t, x] = sets[op.pick % sets.length]!;
        switch (op.kind) {
          case 'allocate': {
            const cached = Math.min(op.cached, op.tokens);
            const ok = m.allocate(x, op.tokens, cached);
            agree(c.allocate(t, op.tokens, cached), ok);
            if (!ok) seen.failures++;
            break;
          }
          case 'slide': {
            const n = m.releaseOutOfWindow(x, op.cached);
            agree(c.releaseOutOfWindow(t, op.cached), n);
            seen.released += n;
            break;
          }
          case 'deallocate':
            c.deallocate(t);
            m.deallocate(x);
            break;
          case 'fork':
            sets.push([c.fork(t), m.fork(x)]);
            break;
        }
      }
      compareComposite(c, m, sets);
    }
    countSteps(ops.length);
    for (const [t, x] of sets) {
      c.deallocate(t);
      m.deallocate(x);
    }
    compareComposite(c, m, sets);
    for (const s of c.subManagers) expect(s.numFreeBlocks()).toBe(s.numTotalBlocks());
  } finally {
    c.dispose();
    other.dispose();
  }
}

// ---- SlidingWindowBlockManager ----

type SwaOp =
  | { kind: 'grow'; pick: number; n: number }
  | { kind: 'new' }
  | { kind: 'slide'; pick: number; cached: number }
  | { kind: 'drop'; pick: number }
  | { kind: 'share'; pick: number }
  | { kind: 'peek'; cached: number; length: number }
  | { kind: 'bad'; which: number; pick: number };

const swaOpArb: fc.Arbitrary<SwaOp> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'new' as const }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('grow' as const), pick: fc.nat(), n: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('slide' as const), pick: fc.nat(), cached: fc.nat({ max: 60 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('drop' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('share' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('peek' as const), cached: fc.nat({ max: 60 }), length: fc.nat({ max: 16 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bad' as const), which: fc.nat({ max: 4 }), pick: fc.nat() }) },
);

function runSwa(ops: SwaOp[], numBlocks: number, blockSize: number, window: number): void {
  const c = new SlidingWindowBlockManager({ numBlocks, blockSize, slidingWindowSize: window });
  const m = new ModelSlidingWindowBlockManager(numBlocks, blockSize, window);
  // Tables the test builds: the window's view of a sequence (-1 where slid out).
  const tables: Array<[Int32Array, number[]]> = [];
  const compare = () => {
    c.check();
    agree(tables.map(([t]) => Array.from(t)), tables.map(([, x]) => x), 'tables');
    agree([Array.from(c.freeIds()), c.numUsedBlocks(), c.numBlocksInPrefixCache()], [m.free, m.numUsedBlocks(), 0], 'free, used, cached');
  };
  try {
    for (const op of ops) {
      const pair = tables.length > 0 ? tables[((op as { pick?: number }).pick ?? 0) % tables.length] : undefined;
      switch (op.kind) {
        case 'new':
          tables.push([new Int32Array(0), []]);
          break;
        case 'grow': {
          if (!pair) break;
          const got = m.allocate(op.n);
          const a = c.allocate(op.n);
          agree(a === null ? null : Array.from(a), got);
          if (got) {
            const i = tables.indexOf(pair);
            tables[i] = [Int32Array.from([...pair[0], ...a!]), [...pair[1], ...got]];
          }
          break;
        }
        case 'slide':
          if (pair) agree(c.releaseOutOfWindow(pair[0], op.cached), m.releaseOutOfWindow(pair[1], op.cached));
          break;
        case 'drop': {
          // The sequence ends: every id it still holds goes back, in order.
          if (!pair) break;
          c.deallocate(pair[0].filter((id) => id !== -1));
          m.deallocate(pair[1].filter((id) => id !== -1));
          tables.splice(tables.indexOf(pair), 1);
          break;
        }
        case 'share': {
          // A fork: the same ids, one more reference on each.
          if (!pair) break;
          const ids = pair[1].filter((id) => id !== -1);
          c.retain(ids);
          m.retain(ids);
          tables.push([Int32Array.from(pair[0]), [...pair[1]]]);
          break;
        }
        case 'peek':
          agree(c.outOfWindow(op.cached, op.length), m.outOfWindow(op.cached, op.length));
          agree([c.allocateShared([1, 2, 3, 4]).length, c.cache([1, 2, 3, 4], [])], [0, 0], 'no prefix cache');
          break;
        case 'bad': {
          const t = pair?.[1] ?? [];
          const held = t.filter((id) => id !== -1);
          if (op.which === 0) {
            // The window table of the core is an Int32Array (the model's is an array: nothing to compare).
            expect(() => c.releaseOutOfWindow([1, 2] as never, 60)).toThrow(TypeError);
            seen.swaRefusals.add(0);
            break;
          }
          const calls: Array<[() => unknown, () => unknown] | null> = [
            null,
            [() => c.releaseOutOfWindow(Int32Array.from(t), -1), () => m.releaseOutOfWindow([...t], -1)],
            // A placeholder after a held block.
            held.length > 0 ? [() => c.releaseOutOfWindow(Int32Array.of(held[0]!, -1), 60), () => m.releaseOutOfWindow([held[0]!, -1], 60)] : null,
            // An id nobody holds.
            m.free.length > 0 ? [() => c.releaseOutOfWindow(Int32Array.of(m.free[0]!), 60), () => m.releaseOutOfWindow([m.free[0]!], 60)] : null,
            [() => c.outOfWindow(-1, 2), () => m.outOfWindow(-1, 2)],
          ];
          const call = calls[op.which];
          if (!call) break;
          sameRefusal(call[0], call[1]);
          seen.swaRefusals.add(op.which);
          break;
        }
      }
      compare();
    }
    countSteps(ops.length);
  } finally {
    c.dispose();
  }
}

describe('standalone composite managers vs reference model', () => {
  it('CompositeBlockManager agrees on random table operations', () => {
    fc.assert(
      fc.property(layoutArb, fc.array(compositeOpArb, { minLength: 20, maxLength: 400, size: 'max' }), runComposite),
      { numRuns: soak(150) },
    );
    expect([...seen.compositeRefusals].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(seen.failures).toBeGreaterThan(0);
    expect(seen.released).toBeGreaterThan(0);
  });

  it('SlidingWindowBlockManager agrees on random window operations', () => {
    fc.assert(
      fc.property(
        fc.array(swaOpArb, { minLength: 20, maxLength: 400, size: 'max' }),
        fc.integer({ min: 2, max: 30 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 16 }),
        runSwa,
      ),
      { numRuns: soak(150) },
    );
    expect([...seen.swaRefusals].sort()).toEqual([0, 1, 2, 3, 4]);
  });
});
