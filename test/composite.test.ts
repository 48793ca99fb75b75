// Scenario tests for CompositeBlockManager, SlidingWindowBlockManager and
// composite ranks of BlockManagerPool (docs/composite.md).

import { describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { CompositeBlockManager, type CompositeBlockManagerOptions } from '../bindings/managers/composite-block-manager.js';
import type { CompositeBlockTables } from '../bindings/managers/composite-block-tables.js';
import {
  SlidingWindowBlockManager,
  outOfWindowBlocks,
  swaBlocksPerSeq,
  swaPoolBlocks,
} from '../bindings/managers/sliding-window-block-manager.js';
import { BlockManagerPool, type BlockManagerPoolOptions } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';

// Sub-manager 0: sliding window of 8 tokens, blocks of 4, pool 2*2 + 2 + 2 + 2 = 10 (the layout rule).
// Sub-manager 1: full, blocks of 4, 16 blocks. Sub-manager 2: full, ratio 4: blocks of 16, 4 blocks.
const LAYOUT: CompositeBlockManagerOptions = {
  blockSize: 4,
  numBlocks: 16,
  managerTypes: ['sliding-window', 'full', 'full'],
  compressRatios: [0, 1, 4],
  slidingWindowSize: 8,
  maxSeqsPerBatch: 2,
  maxTokensPerBatch: 8,
};

function composite(more: Partial<CompositeBlockManagerOptions> = {}) {
  return new CompositeBlockManager({ ...LAYOUT, ...more });
}
/** LAYOUT with every sub-manager's size given: the window pool's sizing options go. */
function sized(subManagerBlocks: number[], more: Partial<CompositeBlockManagerOptions> = {}) {
  const { maxSeqsPerBatch: _s, maxTokensPerBatch: _t, ...rest } = LAYOUT;
  return new CompositeBlockManager({ ...rest, subManagerBlocks, ...more });
}
const tables = (t: CompositeBlockTables) => t.views().map((v) => [...v]);
const freeStacks = (m: CompositeBlockManager) => m.subManagers.map((s) => [...s.freeIds()]);

describe('layout and sizing', () => {
  it('derives block sizes, pool sizes and the capacity sub-manager from the options', () => {
    const m = composite();
    try {
      expect(m.specs).toEqual([
        { kind: 'sliding-window', compressRatio: 0, blockSize: 4, numBlocks: 10 },
        { kind: 'full', compressRatio: 1, blockSize: 4, numBlocks: 16 },
        { kind: 'full', compressRatio: 4, blockSize: 16, numBlocks: 4 },
      ]);
      expect(m.subManagers[0]).toBeInstanceOf(SlidingWindowBlockManager);
      expect(m.capacityIndex).toBe(1);
      expect(m.numFreeBlocks()).toBe(15);
      expect(m.numTotalBlocks()).toBe(15);
      expect(m.numBlocksInPrefixCache()).toBe(0);
    } finally {
      m.dispose();
    }
  });

  it('follows the reference sizing rule with its defaults, and takes overrides', () => {
    expect(swaBlocksPerSeq(384, 128)).toBe(3);
    expect(swaBlocksPerSeq(128, 128)).toBe(1);
    expect(swaBlocksPerSeq(129, 128)).toBe(2);
    // 3 * 256 + ceil(20480 / 128) + 256 + 2
    expect(swaPoolBlocks({ blockSize: 128, slidingWindowSize: 384 })).toBe(768 + 160 + 258);
    expect(swaPoolBlocks({ blockSize: 128, slidingWindowSize: 384, maxSeqsPerBatch: 0, maxTokensPerBatch: 0 })).toBe(3 + 1 + 1 + 2);
    // The sizing functions check their arguments as the managers do.
    expect(() => swaBlocksPerSeq(-5, 16)).toThrow(new RangeError('slidingWindowSize must be >= 1, got -5'));
    expect(() => swaBlocksPerSeq(512, 0)).toThrow(new RangeError('blockSize must be >= 1, got 0'));
    expect(() => swaPoolBlocks({} as never)).toThrow(new TypeError('sizing.blockSize must be a number, got undefined'));
    expect(() => swaPoolBlocks({ blockSize: 4, slidingWindowSize: 8, maxSeqsPerBatch: 1.5 })).toThrow(/^sizing.maxSeqsPerBatch must be an integer/);
    expect(() => swaPoolBlocks({ blockSize: 4, slidingWindowSize: 8, windows: 2 } as never)).toThrow(/^sizing: unknown option "windows"/);
    const m = composite({ swaBlocksPerSeq: 5 });
    expect(m.specs[0]!.numBlocks).toBe(5 * 2 + 2 + 2 + 2);
    m.dispose();
    const o = sized([7, 9, 3]);
    expect(o.specs.map((s) => s.numBlocks)).toEqual([7, 9, 3]);
    o.dispose();
  });

  it('takes capacity from the finest admission sub-manager, not sub-manager 1', () => {
    const m = new CompositeBlockManager({
      blockSize: 2,
      numBlocks: 1024,
      managerTypes: [1, 0, 0],
      compressRatios: [0, 128, 4],
      slidingWindowSize: 16,
    });
    try {
      expect(m.specs.map((s) => [s.blockSize, s.numBlocks])).toEqual([
        [2, 8 * 256 + 10240 + 256 + 2],
        [256, 8],
        [8, 256],
      ]);
      expect(m.capacityIndex).toBe(2);
      expect(m.numFreeBlocks()).toBe(255);
    } finally {
      m.dispose();
    }
  });

  it('uses sub-manager 0 for capacity when every sub-manager is a window', () => {
    const m = new CompositeBlockManager({ blockSize: 4, numBlocks: 16, managerTypes: [1, 1], slidingWindowSize: 4, subManagerBlocks: [5, 6] });
    expect(m.capacityIndex).toBe(0);
    expect(m.numFreeBlocks()).toBe(4);
    m.dispose();
  });

  it('rejects bad layouts, naming the option', () => {
    expect(() => composite({ managerTypes: [] })).toThrow(/options.managerTypes must name at least one sub-manager/);
    expect(() => composite({ managerTypes: ['full', 2 as never, 'full'] })).toThrow(/options.managerTypes\[1\] must be 0, 1, "full" or "sliding-window", got 2/);
    expect(() => composite({ compressRatios: [0, 1] })).toThrow(/options.compressRatios must have 3 entries \(one per sub-manager\), got 2/);
    expect(() => composite({ compressRatios: [0, 0, 4] })).toThrow(/options.compressRatios\[1\] must be >= 1, got 0/);
    expect(() => composite({ compressRatios: [0, 1, 1.5] })).toThrow(/options.compressRatios\[2\] must be an integer, got 1.5/);
    expect(() => composite({ slidingWindowSize: undefined })).toThrow(/options.slidingWindowSize is required with a sliding-window sub-manager/);
    expect(() => composite({ slidingWindowSize: 0 })).toThrow(/options.slidingWindowSize must be >= 1, got 0/);
    expect(() => composite({ compressRatios: [0, 1, 17] })).toThrow(/options.numBlocks \/ compressRatios\[2\] = 16 \/ 17 leaves sub-manager 2 not even its padding block/);
    expect(() => composite({ managerTypes: ['full'], compressRatios: [1], slidingWindowSize: 8 } as never)).toThrow(
      /options.slidingWindowSize does nothing without a sliding-window sub-manager/,
    );
    expect(() => sized([10, 1, 4])).toThrow(/options.subManagerBlocks\[1\] must be >= 2, got 1/);
    expect(() => composite({ swaBlocksPerSeq: 0 })).toThrow(/options.swaBlocksPerSeq must be >= 1, got 0/);
    for (const k of ['swaBlocksPerSeq', 'maxSeqsPerBatch', 'maxTokensPerBatch'] as const) {
      expect(() => sized([7, 9, 3], { [k]: 4 })).toThrow(
        new RangeError(`options.${k} does nothing with options.subManagerBlocks, which sets every sub-manager's size`),
      );
    }
    expect(() => composite({ enablePrefixCache: true } as never)).toThrow(/^options: unknown option "enablePrefixCache"/);
    expect(() => composite({ managerTypes: 'full' as never })).toThrow(/options.managerTypes must be an array, got "full"/);
  });

  it('names every size it refuses, including the sizes it derives', () => {
    expect(() => new CompositeBlockManager(null as never)).toThrow(/^options must be an object/);
    expect(() => composite({ blockSize: 0 })).toThrow(/^options.blockSize must be >= 1, got 0/);
    expect(() => composite({ numBlocks: 1 })).toThrow(/^options.numBlocks must be >= 2, got 1/);
    expect(() => composite({ maxSeqsPerBatch: -1 })).toThrow(/^options.maxSeqsPerBatch must be >= 0, got -1/);
    expect(() => composite({ maxTokensPerBatch: 1.5 })).toThrow(/^options.maxTokensPerBatch must be an integer, got 1.5/);
    expect(() => sized(10 as never)).toThrow(/^options.subManagerBlocks must be an array/);
    // Derived: a block of blockSize * ratio tokens, and a window pool of perSeq * maxSeqs + ... blocks, must be int32.
    expect(() => composite({ blockSize: 2 ** 30 })).toThrow(/^options.blockSize \* compressRatios\[2\] must be at most 2147483647 \(int32\), got 4294967296/);
    expect(() => composite({ swaBlocksPerSeq: 2 ** 30 })).toThrow(/^the window pool size of sub-manager 0 must be at most 2147483647 \(int32\)/);
  });

  it('CompositeBlockManager.create gives a working manager whose sub-managers keep no prefix cache, and refuses bad options by name', async () => {
    const m = await CompositeBlockManager.create(LAYOUT);
    try {
      expect(m.subManagers.map((s) => s.enablePrefixCache)).toEqual([false, false, false]);
      const t = m.newTables();
      expect(m.allocate(t, 8, 0)).toBe(true);
      expect(tables(t)).toEqual([[1, 2], [1, 2], [1]]);
      m.check();
    } finally {
      m.dispose();
    }
    await expect(CompositeBlockManager.create({ ...LAYOUT, numBlocks: 1 })).rejects.toThrow(/^options.numBlocks must be >= 2, got 1/);
    await expect(CompositeBlockManager.create(null as never)).rejects.toThrow(/^options must be an object/);
  });
});

describe('a derived sub-manager that holds only its padding block', () => {
  it('is built, as in the reference, and every allocation that needs it fails without changing anything', () => {
    // 16 / 9 = 1 block: the ratio-9 sub-manager has nothing but its padding block.
    const m = composite({ compressRatios: [0, 1, 9] });
    expect(m.specs[2]!.numBlocks).toBe(1);
    expect(m.subManagers[2]!.numFreeBlocks()).toBe(0);
    const t = m.newTables();
    const before = freeStacks(m);
    expect(m.allocate(t, 4)).toBe(false);
    expect(freeStacks(m)).toEqual(before);
    expect(tables(t)).toEqual([[], [], []]);
    expect(m.subManagerStats()[2]!.roundsShort).toBe(1);
    m.check();
    m.dispose();
  });
});

describe('what slides out of the window', () => {
  it('keeps the blocks covering the last W - 1 computed tokens', () => {
    expect(outOfWindowBlocks(640, 384, 128, 10)).toBe(2); // the worked example: skipped 257
    expect(outOfWindowBlocks(383, 384, 128, 10)).toBe(0);
    expect(outOfWindowBlocks(384, 384, 128, 10)).toBe(0);
    expect(outOfWindowBlocks(511, 384, 128, 10)).toBe(1);
    expect(outOfWindowBlocks(10_000, 384, 128, 3)).toBe(3); // capped by the table
    expect(() => outOfWindowBlocks(640, 384, 0, 10)).toThrow(new RangeError('blockSize must be >= 1, got 0'));
    expect(() => outOfWindowBlocks(640, 0, 128, 10)).toThrow(new RangeError('slidingWindowSize must be >= 1, got 0'));
    expect(() => outOfWindowBlocks(-1, 384, 128, 10)).toThrow(/^kvCachedTokens must be >= 0, got -1/);
    expect(() => outOfWindowBlocks(640, 384, 128, NaN)).toThrow(/^length must be an integer, got NaN/);
  });

  it('SlidingWindowBlockManager.releaseOutOfWindow gives back exact ids in index order, once', () => {
    const m = new SlidingWindowBlockManager({ numBlocks: 8, blockSize: 4, slidingWindowSize: 8 });
    try {
      const t = m.allocate(4)!;
      expect([...t]).toEqual([1, 2, 3, 4]);
      expect(m.releaseOutOfWindow(t, 7)).toBe(0);
      expect(m.releaseOutOfWindow(t, 12)).toBe(1);
      expect([...t]).toEqual([-1, 2, 3, 4]);
      expect(m.releaseOutOfWindow(t, 12)).toBe(0); // placeholders are skipped
      expect(m.releaseOutOfWindow(t, 15)).toBe(1);
      expect([...t]).toEqual([-1, -1, 3, 4]);
      expect([...m.freeIds()].slice(-2)).toEqual([1, 2]);
      expect(m.refCount(1)).toBe(0);
      expect(m.allocateShared([1, 2, 3, 4, 5, 6, 7, 8]).length).toBe(0);
      expect(m.cache([1, 2, 3, 4], [3])).toBe(0);
      expect(m.enablePrefixCache).toBe(false);
      expect(() => m.releaseOutOfWindow([1, 2] as never, 9)).toThrow(/table must be an Int32Array, got an array of length 2/);
      expect(() => m.releaseOutOfWindow(t, -1)).toThrow(/kvCachedTokens must be >= 0, got -1/);
      expect(() => new SlidingWindowBlockManager({ numBlocks: 8, blockSize: 4 } as never)).toThrow(/options.slidingWindowSize must be a number, got undefined/);
      m.check();
    } finally {
      m.dispose();
    }
  });

  it('SlidingWindowBlockManager.create gives a working manager and refuses bad options by name', async () => {
    const m = await SlidingWindowBlockManager.create({ numBlocks: 8, blockSize: 4, slidingWindowSize: 8 });
    expect(m.slidingWindowSize).toBe(8);
    expect([...m.allocate(2)!]).toEqual([1, 2]);
    m.dispose();
    await expect(SlidingWindowBlockManager.create({ numBlocks: 8, blockSize: 4, slidingWindowSize: 0 })).rejects.toThrow(/^options.slidingWindowSize must be >= 1, got 0/);
  });

  it('SlidingWindowBlockManager names what it refuses', () => {
    expect(() => new SlidingWindowBlockManager(null as never)).toThrow(/^options must be an object/);
    expect(() => new SlidingWindowBlockManager({ numBlocks: 8, blockSize: 4, slidingWindowSize: 8, w: 1 } as never)).toThrow(/^options: unknown option "w"/);
    expect(() => new SlidingWindowBlockManager({ numBlocks: 1, blockSize: 4, slidingWindowSize: 8 })).toThrow(/^options.numBlocks must be >= 2, got 1/);
    expect(() => new SlidingWindowBlockManager({ numBlocks: 8, blockSize: 0, slidingWindowSize: 8 })).toThrow(/^options.blockSize must be >= 1, got 0/);
    const m = new SlidingWindowBlockManager({ numBlocks: 8, blockSize: 4, slidingWindowSize: 8 });
    expect(() => m.allocateShared([0.5])).toThrow(/^tokens\[0\] must be an int32 integer/);
    expect(() => m.allocateShared([1], [0.5])).toThrow(/^existingShared\[0\] must be an int32 integer/);
    expect(() => m.cache([0.5], [])).toThrow(/^tokens\[0\] must be an int32 integer/);
    expect(() => m.cache([1], [0.5])).toThrow(/^ids\[0\] must be an int32 integer/);
    expect(() => m.cache([1], [], -1)).toThrow(/^existingSharedCount must be >= 0, got -1/);
    expect(() => m.outOfWindow(0.5, 4)).toThrow(/^kvCachedTokens must be an integer/);
    expect(() => m.outOfWindow(8, -1)).toThrow(/^length must be >= 0, got -1/);
    expect(m.outOfWindow(12, 4)).toBe(1);
    m.dispose();
  });
});

describe('all-or-nothing growth', () => {
  it('a single sequence grows in steps; the window gives back exact ids after each commit', () => {
    const m = composite();
    try {
      const t = m.newTables();
      expect(m.allocate(t, 10, 0)).toBe(true);
      expect(tables(t)).toEqual([[1, 2, 3], [1, 2, 3], [1]]);
      expect(m.allocate(t, 11, 10)).toBe(true); // skipped 3 tokens: no whole block yet
      expect(tables(t)).toEqual([[1, 2, 3], [1, 2, 3], [1]]);
      expect(m.allocate(t, 12, 11)).toBe(true); // nothing to grow, block 0 slides out
      expect(tables(t)).toEqual([[-1, 2, 3], [1, 2, 3], [1]]);
      expect(m.subManagers[0]!.refCount(1)).toBe(0);
      expect(m.allocate(t, 13, 12)).toBe(true); // the window's new block is the id it just gave back
      expect(tables(t)).toEqual([[-1, 2, 3, 1], [1, 2, 3, 4], [1]]);
      for (let n = 14; n <= 16; n++) expect(m.allocate(t, n, n - 1)).toBe(true);
      expect(tables(t)).toEqual([[-1, -1, 3, 1], [1, 2, 3, 4], [1]]);
      expect(m.allocate(t, 17, 16)).toBe(true);
      expect(tables(t)).toEqual([[-1, -1, 3, 1, 2], [1, 2, 3, 4, 5], [1, 2]]);
      expect(t.released(0)).toBe(2);
      const st = m.subManagerStats();
      expect(st.map((s) => s.peakUsedBlocks)).toEqual([3, 5, 2]);
      expect(st.map((s) => s.blocksReleasedOutOfWindow)).toEqual([2, 0, 0]);
      expect(st.map((s) => s.admission)).toEqual([false, true, true]);
      m.checkHolders([t]);
      expect(() => m.checkHolders(t as never)).toThrow(
        new TypeError('tables must be an iterable of every CompositeBlockTables holding ids of this manager (an array), got a CompositeBlockTables'),
      );
      expect(() => t.table(3)).toThrow(new RangeError('i must be in [0, 2], got 3'));
      expect(() => t.length(-1)).toThrow(new RangeError('i must be in [0, 2], got -1'));
      expect(() => t.released(1.5)).toThrow(new RangeError('i must be an integer, got 1.5'));
      expect(t.length(1)).toBe(t.table(1).length);
      m.check();
    } finally {
      m.dispose();
    }
  });

  it('two sequences share the pools; a window id given back goes to the next grower', () => {
    const m = composite();
    try {
      const a = m.newTables();
      const b = m.newTables();
      expect(m.allocate(a, 8)).toBe(true);
      expect(m.allocate(b, 8)).toBe(true);
      expect(tables(a)).toEqual([[1, 2], [1, 2], [1]]);
      expect(tables(b)).toEqual([[3, 4], [3, 4], [2]]);
      expect(m.allocate(a, 9, 8)).toBe(true);
      expect(tables(a)).toEqual([[1, 2, 5], [1, 2, 5], [1]]);
      expect(m.allocate(b, 12, 11)).toBe(true);
      expect(tables(b)).toEqual([[-1, 4, 6], [3, 4, 6], [2]]);
      expect(m.allocate(a, 13, 12)).toBe(true);
      expect(tables(a)).toEqual([[-1, 2, 5, 3], [1, 2, 5, 7], [1]]);
      expect([...m.subManagers[0]!.freeIds()]).toEqual([9, 8, 7, 1]);
      m.checkHolders([a, b]);
    } finally {
      m.dispose();
    }
  });

  it('a satisfied sub-manager does not stop the others', () => {
    const m = composite();
    try {
      const t = m.newTables();
      expect(m.allocate(t, 10)).toBe(true);
      const coarseFree = [...m.subManagers[2]!.freeIds()];
      expect(m.allocate(t, 14, 0)).toBe(true); // the ratio-4 table already covers 16 tokens
      expect(tables(t)).toEqual([[1, 2, 3, 4], [1, 2, 3, 4], [1]]);
      expect([...m.subManagers[2]!.freeIds()]).toEqual(coarseFree);
      // And the other way round: only the coarse table needs a block.
      const u = m.newTables();
      expect(m.allocate(u, 4)).toBe(true);
      expect(m.allocate(t, 16)).toBe(true);
      expect(tables(t)).toEqual([[1, 2, 3, 4], [1, 2, 3, 4], [1]]);
      expect(m.allocate(t, 17)).toBe(true);
      expect(tables(t)).toEqual([[1, 2, 3, 4, 6], [1, 2, 3, 4, 6], [1, 3]]);
      m.checkHolders([t, u]);
    } finally {
      m.dispose();
    }
  });

  it('a failed growth changes nothing: no table, no free stack, no window release', () => {
    const m = sized([10, 16, 2]); // one coarse block in all
    try {
      const t = m.newTables();
      expect(m.allocate(t, 16)).toBe(true);
      expect(tables(t)).toEqual([[1, 2, 3, 4], [1, 2, 3, 4], [1]]);
      const before = { tables: tables(t), free: freeStacks(m), used: m.subManagers.map((s) => s.numUsedBlocks()), rel: t.released(0) };
      const statsBefore = m.subManagerStats();
      // 17 tokens need a second coarse block: short. With 15 computed tokens the
      // window would give 2 blocks back -- but a failed round releases nothing.
      expect(m.allocate(t, 17, 15)).toBe(false);
      expect({ tables: tables(t), free: freeStacks(m), used: m.subManagers.map((s) => s.numUsedBlocks()), rel: t.released(0) }).toEqual(before);
      const statsAfter = m.subManagerStats();
      expect(statsAfter.map((s) => s.roundsShort)).toEqual([0, 0, 1]);
      expect(statsAfter.map((s) => s.blocksAllocated)).toEqual(statsBefore.map((s) => s.blocksAllocated));
      expect(statsAfter.map((s) => s.allocationFailures)).toEqual([0, 0, 0]);
      // The same computed count without growth releases them.
      expect(m.allocate(t, 16, 15)).toBe(true);
      expect(tables(t)).toEqual([[-1, -1, 3, 4], [1, 2, 3, 4], [1]]);
      expect([...m.subManagers[0]!.freeIds()].slice(-2)).toEqual([1, 2]);
      m.checkHolders([t]);
    } finally {
      m.dispose();
    }
  });

  it('deallocation gives every id back, in index order, with no reference left over', () => {
    const m = composite();
    try {
      const a = m.newTables();
      expect(m.allocate(a, 13, 0)).toBe(true);
      expect(m.allocate(a, 13, 12)).toBe(true);
      expect(tables(a)).toEqual([[-1, 2, 3, 4], [1, 2, 3, 4], [1]]);
      const f = m.fork(a);
      expect(tables(f)).toEqual(tables(a));
      expect(m.subManagers[0]!.refCount(2)).toBe(2);
      expect(m.subManagers[2]!.refCount(1)).toBe(2);
      m.deallocate(a);
      expect(tables(a)).toEqual([[], [], []]);
      expect(m.subManagers.map((s) => s.numUsedBlocks())).toEqual([3, 4, 1]);
      m.checkHolders([f]);
      m.deallocate(f);
      expect([...m.subManagers[0]!.freeIds()].slice(-3)).toEqual([2, 3, 4]);
      expect([...m.subManagers[1]!.freeIds()].slice(-4)).toEqual([1, 2, 3, 4]);
      m.subManagers.forEach((s) => {
        expect(s.numFreeBlocks()).toBe(s.numTotalBlocks());
        expect(s.numUsedBlocks()).toBe(0);
        expect([...s.holderCounts()].slice(1).every((h) => h === 0)).toBe(true);
      });
      m.checkHolders([]);
      m.check();
    } finally {
      m.dispose();
    }
  });

  it('validates its arguments before changing anything', () => {
    const m = composite();
    const o = composite();
    try {
      const t = m.newTables();
      expect(() => m.allocate(o.newTables(), 4)).toThrow(/tables were made by another composite manager/);
      expect(() => m.allocate({} as never, 4)).toThrow(/tables must be a CompositeBlockTables, got an Object/);
      expect(() => m.allocate(t, -1)).toThrow(/^numTokens must be >= 0, got -1/);
      expect(() => m.allocate(t, 4, 0.5)).toThrow(/^kvCachedTokens must be an integer, got 0.5/);
      expect(() => m.allocate(t, 24, 30)).toThrow(new RangeError('kvCachedTokens must be in [0, 24], got 30'));
      expect(() => m.releaseOutOfWindow(t, 0.5)).toThrow(/^kvCachedTokens must be an integer, got 0.5/);
      expect(tables(t)).toEqual([[], [], []]);
      expect(freeStacks(m)).toEqual(freeStacks(o));
    } finally {
      m.dispose();
      o.dispose();
    }
    expect(() => m.allocate(m.newTables(), 4)).toThrow(/this CompositeBlockManager was disposed/);
  });
});

const POOL: BlockManagerPoolOptions = {
  numBlocks: 16,
  blockSize: 4,
  managerTypes: [1, 0, 0],
  compressRatios: [0, 1, 4],
  slidingWindowSize: 8,
  maxSeqsPerBatch: 2,
  maxTokensPerBatch: 8,
  singleBlockCapacity: 4,
};
const toks = (n: number, base = 100) => Array.from({ length: n }, (_, i) => base + i);
function poolState(p: BlockManagerPool) {
  return {
    subs: p.compositeManager(0)!.subManagers.map((s) => [...s.freeIds()]),
    single: [...p.singles[0]!.freeIds()],
    free: p.numFreeBlocks(),
  };
}

describe('composite ranks of BlockManagerPool', () => {
  it('picks the composite when managerTypes is given; capacity figures from the finest admission sub-manager', () => {
    const p = new BlockManagerPool(POOL);
    try {
      expect(p.compositeManager(0)).toBeInstanceOf(CompositeBlockManager);
      expect(p.enablePrefixCache).toBe(false);
      const s = new Sequence(toks(10));
      expect(p.allocate(s)).toBe(true);
      expect(s.compositeBlockTables.map((v) => [...v])).toEqual([[1, 2, 3], [1, 2, 3], [1]]);
      expect(s.blockTable.length).toBe(0);
      expect(s.singleBlockId).toBe(1);
      expect(p.numFreeBlocks()).toEqual([12]);
      expect(p.numUsedBlocks()).toEqual([3]);
      expect(p.numBlocksInPrefixCache()).toEqual([0]);
      expect(p.subManagerStats(0).map((x) => [x.kind, x.numFreeBlocks])).toEqual([
        ['sliding-window', 6],
        ['full', 12],
        ['full', 2],
      ]);
      expect(new BlockManagerPool({ numBlocks: 8, blockSize: 4 }).compositeManager(0)).toBeNull();
      p.check();
    } finally {
      p.dispose();
    }
  });

  it('decodes with the window sliding, and slot ids per table', () => {
    const p = new BlockManagerPool(POOL);
    try {
      const s = new Sequence(toks(10));
      expect(p.allocate(s)).toBe(true);
      s.kvCachedTokens = 10;
      for (let i = 0; i < 3; i++) {
        s.appendToken(7 + i);
        s.kvCachedTokens = s.numTokens - 1;
        expect(p.allocate(s, s.numTokens)).toBe(true);
        p.check();
      }
      expect(s.compositeBlockTables.map((v) => [...v])).toEqual([[-1, 2, 3, 1], [1, 2, 3, 4], [1]]);
      expect([...s.slotIds(2, 6, 0)]).toEqual([-1, -1, 8, 9]);
      expect([...s.slotIds(11, 13, 0)]).toEqual([15, 4]);
      expect([...s.slotIds(11, 13, 1)]).toEqual([15, 16]);
      expect([...s.slotIds(0, 2, 2)]).toEqual([16, 17]);
      expect(() => s.slotIds(0, 17, 1)).toThrow(/end = 17 is beyond the 4 blocks of 4 tokens of composite table 1/);
      expect(s.slotIds(0, 16, 1).length).toBe(16); // up to the last held token
      expect(() => s.slotIds(-1, 2, 1)).toThrow(/^start must be >= 0, got -1/);
      expect(() => s.slotIds(3, 2, 1)).toThrow(/^end must be >= 3, got 2/);
      expect(() => s.slotIds(0, 1, 3)).toThrow(/table must be in \[0, 2\], got 3/);
      expect(() => new Sequence([1]).slotIds(0, 1, 0)).toThrow(/holds no composite block tables/);
    } finally {
      p.dispose();
    }
  });

  it('does no prefix caching: cache is a no-op and allocateShared matches nothing', () => {
    const p = new BlockManagerPool(POOL);
    try {
      const a = new Sequence(toks(8));
      expect(p.allocate(a)).toBe(true);
      a.kvCachedTokens = 8;
      p.cache(a);
      p.deallocate(a);
      expect(p.numBlocksInPrefixCache()).toEqual([0]);
      const b = new Sequence(toks(8));
      expect(p.allocateShared(b)).toBe(0);
      expect(p.allocate(b)).toBe(true);
      expect(b.sharedBlocks).toBe(0);
      expect(b.kvCachedTokens).toBe(0);
      expect(b.compositeBlockTables.map((v) => [...v])).toEqual([[2, 1], [2, 1], [1]]);
      p.check();
    } finally {
      p.dispose();
    }
  });

  it('rolls an empty sequence back exactly: no table, no single id, every pool as before', () => {
    const p = new BlockManagerPool({ ...POOL, maxSeqsPerBatch: undefined, maxTokensPerBatch: undefined, subManagerBlocks: [3, 16, 4] });
    try {
      const before = poolState(p);
      const s = new Sequence(toks(12)); // 3 window blocks; the window pool has 2
      expect(p.allocate(s)).toBe(false);
      expect(poolState(p)).toEqual(before);
      expect(s.dpRank).toBe(0); // placed for good, as in the reference
      expect(s.singleBlockId).toBe(-1);
      expect(s.compositeBlockTables.every((v) => v.length === 0)).toBe(true);
      expect(p.liveSequences().has(s)).toBe(false);
      expect(p.subManagerStats(0).map((x) => x.roundsShort)).toEqual([1, 0, 0]);
      expect(p.tryAllocate(s)).toBe(false);
      expect(poolState(p)).toEqual(before);
      p.check();
      // A sequence that holds blocks keeps them and its single id when growth fails.
      const t = new Sequence(toks(8));
      expect(p.allocate(t)).toBe(true);
      const mid = poolState(p);
      expect(p.allocate(t, 12)).toBe(false);
      expect(poolState(p)).toEqual(mid);
      expect(t.singleBlockId).toBe(1);
      expect(t.compositeBlockTables.map((v) => [...v])).toEqual([[1, 2], [1, 2], [1]]);
      p.check();
    } finally {
      p.dispose();
    }
  });

  it('tryAllocate admits the whole prompt as computed', () => {
    const p = new BlockManagerPool(POOL);
    try {
      const s = new Sequence(toks(9));
      expect(p.tryAllocate(s)).toBe(true);
      expect(s.kvCachedTokens).toBe(9);
      expect(s.compositeBlockTables.map((v) => [...v])).toEqual([[1, 2, 3], [1, 2, 3], [1]]);
      s.appendToken(1);
      expect(p.allocate(s, 10)).toBe(true); // 9 computed: 2 tokens skipped, nothing slides out yet
      s.kvCachedTokens = 9;
      s.appendToken(2);
      s.appendToken(3);
      s.kvCachedTokens = 11;
      expect(p.allocate(s)).toBe(true);
      expect(s.compositeBlockTables.map((v) => [...v])).toEqual([[-1, 2, 3], [1, 2, 3], [1]]);
      p.check();
    } finally {
      p.dispose();
    }
  });

  it('deallocates a composite sequence and its fork: every id back, no reference inflation', () => {
    const p = new BlockManagerPool(POOL);
    try {
      const before = poolState(p);
      const s = new Sequence(toks(13));
      expect(p.allocate(s)).toBe(true);
      s.kvCachedTokens = 12;
      expect(p.allocate(s)).toBe(true);
      const f = s.fork();
      expect(f.compositeBlockTables.map((v) => [...v])).toEqual([[-1, 2, 3, 4], [1, 2, 3, 4], [1]]);
      expect(p.liveSequences().has(f)).toBe(true);
      p.check();
      p.deallocate(s);
      expect(s.compositeBlockTables.every((v) => v.length === 0)).toBe(true);
      p.check();
      expect(p.allocate(f)).toBe(true); // the fork takes its own single id
      expect(f.singleBlockId).toBe(1);
      p.deallocate(f);
      p.check();
      const m = p.compositeManager(0)!;
      m.subManagers.forEach((x) => {
        expect(x.numUsedBlocks()).toBe(0);
        expect([...x.holderCounts()].slice(1).every((h) => h === 0)).toBe(true);
      });
      expect(poolState(p).free).toEqual(before.free);
      expect(p.singles[0]!.numFreeBlocks()).toBe(3);
    } finally {
      p.dispose();
    }
  });

  it('places new sequences by the capacity sub-manager across dp ranks', () => {
    const p = new BlockManagerPool({ ...POOL, dpSize: 2 });
    try {
      const a = new Sequence(toks(8));
      const b = new Sequence(toks(4));
      expect(p.allocate(a)).toBe(true);
      expect(p.allocate(b)).toBe(true);
      expect([a.dpRank, b.dpRank]).toEqual([0, 1]);
      expect(p.numFreeBlocks()).toEqual([13, 14]);
      p.check();
    } finally {
      p.dispose();
    }
  });

  it('rejects bad composite options before creating anything', () => {
    expect(() => new BlockManagerPool({ ...POOL, compressRatios: [1] })).toThrow(/options.compressRatios must have 3 entries/);
    expect(() => new BlockManagerPool({ ...POOL, slidingWindowSize: undefined })).toThrow(/options.slidingWindowSize is required/);
    expect(() => new BlockManagerPool({ ...POOL, windowSize: 3 } as never)).toThrow(/unknown option "windowSize"/);
  });

  it('check() names the sub-manager whose own state is broken, and checkHolders a table that is not well formed', () => {
    const m = composite();
    try {
      const t = m.newTables();
      expect(m.allocate(t, 8, 0)).toBe(true);
      // Break sub-manager 1 behind its back (through the core's memory, as no call can): a free id with a reference.
      const rt = plainCore();
      const sub = m.subManagers[1]!;
      const subPtr = (sub as unknown as { ptr: number }).ptr;
      // A sub-manager keeps no cache: its references are a dense array of i32.
      expect(rt.ex.mgr_refs_stride(subPtr)).toBe(4);
      const at = (rt.ex.mgr_refs_ptr(subPtr) >>> 2) + sub.numBlocks - 1;
      rt.i32[at] = 1;
      expect(() => m.check()).toThrow(/^sub-manager 1: kvpool: manager state is inconsistent: a free id still has references or is cached/);
      rt.i32[at] = 0;
      m.check();
      // A released count past the table, or on a table that is not a window's; a released entry that is not -1.
      t._released[1] = 1;
      expect(() => m.checkHolders([t])).toThrow(/^kvpool: composite table 1 has 1 released of 2 blocks$/);
      t._released[1] = 0;
      t._released[0] = 3;
      expect(() => m.checkHolders([t])).toThrow(/^kvpool: composite table 0 has 3 released of 2 blocks$/);
      t._released[0] = 1;
      expect(() => m.checkHolders([t])).toThrow(/^kvpool: composite table 0 position 0 should be -1, got 1$/);
      t._released[0] = 0;
      // An entry one past the sub-manager's last id.
      t._tables[1]![0] = 16;
      expect(() => m.checkHolders([t])).toThrow(/^kvpool: composite table 1 position 0 holds 16, not an id of sub-manager 1$/);
      t._tables[1]![0] = 1;
      m.checkHolders([t]);
    } finally {
      m.dispose();
    }
  });

  it('a sub-manager that cannot be built leaves none of the others behind', () => {
    const made: BlockManagerImpl[] = [];
    expect(
      () =>
        new CompositeBlockManager(LAYOUT, (spec) => {
          if (made.length === 2) throw new Error('no memory for sub-manager 2');
          const sub = new BlockManagerImpl({ numBlocks: spec.numBlocks, blockSize: spec.blockSize, enablePrefixCache: false });
          made.push(sub);
          return sub;
        }),
    ).toThrow(/^no memory for sub-manager 2$/);
    expect(made.map((s) => s.isDisposed)).toEqual([true, true]);
  });

  it('check() notices a composite table that disagrees with the sub-managers', () => {
    const p = new BlockManagerPool(POOL);
    try {
      const s = new Sequence(toks(8));
      expect(p.allocate(s)).toBe(true);
      const t = s.state.composite!;
      t._tables[1]![0] = 9;
      expect(() => p.check()).toThrow(/sub-manager 1 block 1 has 1 holders but tables hold it 0 times/);
      t._tables[1]![0] = 1;
      t._tables[0]![0] = -1;
      expect(() => p.check()).toThrow(/composite table 0 position 0 holds -1/);
      t._tables[0]![0] = 1;
      p.check();
    } finally {
      p.dispose();
    }
  });
});

describe('SlidingWindowBlockManager errors', () => {
  it('a table with an id it does not hold changes nothing', () => {
    const m = new SlidingWindowBlockManager({ numBlocks: 8, blockSize: 2, slidingWindowSize: 2 });
    try {
      const t = m.allocate(2)!;
      const bad = new Int32Array([t[0]!, 6, t[1]!]);
      const free = [...m.freeIds()];
      expect(() => m.releaseOutOfWindow(bad, 6)).toThrow(/table\[1\] = 6 has no holder left \(it is free\)/);
      expect([...bad]).toEqual([1, 6, 2]);
      expect([...m.freeIds()]).toEqual(free);
      expect(() => m.releaseOutOfWindow(new Int32Array([1, -1, 2]), 6)).toThrow(/table\[1\] = -1 follows a held block/);
      expect(m.refCount(1)).toBe(1);
      m.check();
    } finally {
      m.dispose();
    }
  });
});

describe('recycled tables (a replay hands back a finished sequence\'s)', () => {
  it('newTables hands out a released table again, empty, and it works as a new one', () => {
    const m = composite();
    const t = m.newTables();
    expect(m.allocate(t, 12, 0)).toBe(true);
    m.deallocate(t);
    m.recycleTables(t);
    const u = m.newTables();
    expect(u).toBe(t);
    expect(tables(u)).toEqual([[], [], []]);
    expect(m.allocate(u, 8, 0)).toBe(true);
    // As many blocks per sub-manager as a new table of a new manager gets.
    const fresh = composite();
    const v = fresh.newTables();
    expect(fresh.allocate(v, 8, 0)).toBe(true);
    expect(tables(u).map((x) => x.length)).toEqual(tables(v).map((x) => x.length));
    m.check();
    m.dispose();
    fresh.dispose();
  });

  it('refuses tables that still hold blocks or belong to another manager, keeping none', () => {
    const m = composite();
    const other = composite();
    const held = m.newTables();
    expect(m.allocate(held, 4, 0)).toBe(true);
    expect(() => m.recycleTables(held)).toThrow(/internal error/);
    const foreign = other.newTables();
    expect(() => m.recycleTables(foreign)).toThrow(/internal error/);
    expect(m.newTables()).not.toBe(held);
    expect(m.newTables()).not.toBe(foreign);
    expect(tables(held)).not.toEqual([[], [], []]);
    m.check();
    m.dispose();
    other.dispose();
  });
});
