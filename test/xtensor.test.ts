// Scenario tests of XTensorBlockManagerImpl (docs/xtensor.md): page
// math with straddling blocks, allocation/free/reserve with the exact
// map/unmap events and figures, exhaustion, trim/sleep/wakeup, and the pool
// running on it (enableXtensor).

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { XTensorBlockManagerImpl, pageBlockRange } from '../bindings/managers/xtensor-block-manager-impl.js';
import { W_ALLOCATED_PAGES, W_EV_HEAD, W_FREE_PAGES_HEAD, W_FREE_PAGES_LEN, type XTensorState } from '../bindings/managers/xtensor-state.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { expectCheckCatches } from './support/corrupt.js';
import { fewer } from './support/soak.js';

// Pages of 10 bytes, blocks of 3: page 0 = ids 0..2, id 3 straddles (bytes 9..12),
// page 1 = ids 4, 5 (one block fewer than floor(10/3) = 3), id 6 straddles, page 2 = ids 7..9.
function mgr(more = {}) {
  return new XTensorBlockManagerImpl({
    numBlocks: 10,
    blockSize: 4,
    pageSize: 10,
    blockBytes: 3,
    numLayers: 1,
    minReservedPages: 1,
    maxReservedPages: 1,
    ...more,
  });
}
const map = (page: number) => ({ type: 'map', rank: 0, page, offset: page * 10 });
const unmap = (page: number) => ({ type: 'unmap', rank: 0, page, offset: page * 10 });
function figures(m: XTensorBlockManagerImpl) {
  return { free: m.numFreeBlocks(), used: m.numUsedBlocks(), total: m.numTotalBlocks() };
}

describe('XTensor page math', () => {
  it('gives each page exactly the blocks that lie wholly inside it', () => {
    expect([0, 1, 2, 3].map((p) => pageBlockRange(p, 10, 3, 100))).toEqual([[0, 3], [4, 6], [7, 10], [10, 13]]);
    const m = mgr();
    expect([...Array(10).keys()].map((id) => m.pageOf(id))).toEqual([0, 0, 0, -1, 1, 1, -1, 2, 2, 2]);
    expect(m.pageBlocks(1)).toEqual([4, 6]);
    expect(m.pageBlocks(3)).toEqual([0, 0]);
    expect(m.pageStates()).toEqual({ free: [0, 1, 2], reserved: [], allocated: [] });
  });

  it('never uses a page that holds no whole block', () => {
    // Pages of 6 bytes, blocks of 5: only ids 0, 5 and 6 lie wholly inside a page (0, 4 and 5).
    const m = new XTensorBlockManagerImpl({ numBlocks: 8, blockSize: 1, pageSize: 6, blockBytes: 5, numLayers: 1, minReservedPages: 0 });
    expect(m.pageStates().free).toEqual([0, 4, 5]);
    expect([...Array(8).keys()].map((id) => m.pageOf(id))).toEqual([0, -1, -1, -1, -1, 4, 5, -1]);
    m.reservePaddingBlocks();
    expect([...m.allocate(2)!]).toEqual([5, 6]);
    expect(m.allocate(1)).toBeNull();
    expect(m.takeEvents().map((e) => e.page)).toEqual([0, 4, 5]);
    m.check();
  });
});

describe('XTensorBlockManagerImpl', () => {
  it('maps pages on demand, prefetches to the minimum, and counts blocks per page exactly', () => {
    const m = mgr();
    expect(() => m.allocate(1)).toThrow(/reservePaddingBlocks\(\) must be called before the first allocation/);
    m.reservePaddingBlocks();
    expect(m.takeEvents()).toEqual([map(0), map(1)]); // page 0 for the padding block, page 1 prefetched
    expect(m.pageStates()).toEqual({ free: [2], reserved: [1], allocated: [0] });
    expect(figures(m)).toEqual({ free: 4, used: 1, total: 10 });
    m.check();

    expect([...m.allocate(3)!]).toEqual([1, 2, 4]);
    expect(m.takeEvents()).toEqual([map(2)]); // page 1 taken from the reserve, page 2 prefetched
    expect(m.pageStates()).toEqual({ free: [], reserved: [2], allocated: [0, 1] });
    // Free: id 5 on page 1 and the 3 blocks of reserved page 2 (the reference would count 1 + 3).
    expect(figures(m)).toEqual({ free: 4, used: 4, total: 10 });
    m.check();

    expect([...m.allocate(4)!]).toEqual([5, 7, 8, 9]);
    expect(m.takeEvents()).toEqual([]);
    expect(figures(m)).toEqual({ free: 0, used: 8, total: 10 });
    expect(m.refCount(7)).toBe(1);
    m.check();
  });

  it('returns null when the pages run out, changing nothing', () => {
    const m = mgr();
    m.reservePaddingBlocks();
    expect([...m.allocate(3)!]).toEqual([1, 2, 4]);
    m.takeEvents();
    const before = { states: m.pageStates(), figs: figures(m), stats: m.stats() };
    expect(m.allocate(5)).toBeNull();
    expect(m.takeEvents()).toEqual([]);
    expect(m.pageStates()).toEqual(before.states);
    expect(figures(m)).toEqual(before.figs);
    expect(m.stats().allocationFailures).toBe(before.stats.allocationFailures + 1);
    expect(m.allocate(0)!.length).toBe(0);
    m.check();
    // Physical pages are the limit too: 4 physical pages back two virtual pages (2 per page with one layer).
    const small = mgr({ numPhysicalPages: 4 });
    small.reservePaddingBlocks();
    expect(small.pageStates()).toEqual({ free: [], reserved: [1], allocated: [0] });
    expect(small.allocate(5)).toBeNull();
    expect([...small.allocate(4)!]).toEqual([1, 2, 4, 5]);
    small.check();
  });

  it('frees blocks to their pages, keeps up to the maximum reserved mapped, unmaps the rest', () => {
    const m = mgr();
    m.reservePaddingBlocks();
    const a = m.allocate(3)!;
    const b = m.allocate(4)!;
    m.takeEvents();
    m.deallocate(a.subarray(0, 2)); // ids 1, 2: page 0 keeps the padding block
    expect(m.takeEvents()).toEqual([]);
    expect(figures(m)).toEqual({ free: 2, used: 6, total: 10 });
    m.deallocate([4, 5]); // page 1 empties and goes to the reserve (below the maximum)
    expect(m.takeEvents()).toEqual([]);
    expect(m.pageStates()).toEqual({ free: [], reserved: [1], allocated: [0, 2] });
    expect(figures(m)).toEqual({ free: 4, used: 4, total: 10 });
    m.deallocate(b.subarray(1)); // page 2 empties; the reserve is full: unmapped
    expect(m.takeEvents()).toEqual([unmap(2)]);
    expect(m.pageStates()).toEqual({ free: [2], reserved: [1], allocated: [0] });
    expect(figures(m)).toEqual({ free: 4, used: 1, total: 10 });
    m.check();
    // The next allocation takes the lowest page with free blocks, its freed ids in the order they came back.
    expect([...m.allocate(2)!]).toEqual([1, 2]);
    m.check();
  });

  it('keeps a block while it has holders', () => {
    const m = mgr();
    m.reservePaddingBlocks();
    const [x] = m.allocate(1)!;
    m.retain([x!]);
    m.deallocate([x!]);
    expect(m.refCount(x!)).toBe(1);
    m.deallocate([x!]);
    expect(m.refCount(x!)).toBe(0);
    expect(() => m.deallocate([x!])).toThrow(/ids\[0\] = 1 has no holder left \(it is free\)/);
    expect(() => m.deallocate([0])).toThrow(/ids\[0\] = 0 is the padding block/);
    expect(() => m.deallocate([10])).toThrow(/ids\[0\] = 10 is out of range/);
    const [y] = m.allocate(1)!;
    expect(y).toBe(2); // page 0's free list: 2, then the 1 given back
    expect(() => m.deallocate([y!, y!])).toThrow(/ids\[1\] = 2 has no holder left/);
    expect(m.refCount(y!)).toBe(1);
    m.check();
  });

  it('reserves blocks that later allocations hand out first', () => {
    const m = mgr();
    m.reservePaddingBlocks();
    m.takeEvents();
    expect(m.tryToReserve(3)).toBe(true); // ids 1, 2, 4; page 2 prefetched
    expect(m.takeEvents()).toEqual([map(2)]);
    // Reserved blocks count as free: id 5, the 3 reserved, the 3 on reserved page 2.
    expect(figures(m)).toEqual({ free: 7, used: 1, total: 10 });
    expect(m.tryToReserve(8)).toBe(false); // 1 + 3 reserved + 3: seven can be had
    m.check();
    expect([...m.allocate(2)!]).toEqual([1, 2]);
    m.freeReserved(); // id 4 back: page 1 is empty, the reserve is full, page 1 is unmapped
    expect(m.takeEvents()).toEqual([unmap(1)]);
    expect(figures(m)).toEqual({ free: 3, used: 3, total: 10 });
    m.check();
  });

  it('trims, sleeps and wakes up with the matching events', () => {
    const m = mgr();
    m.reservePaddingBlocks();
    m.allocate(1);
    m.takeEvents();
    m.trim();
    expect(m.takeEvents()).toEqual([unmap(1)]);
    expect(m.pageStates()).toEqual({ free: [2, 1], reserved: [], allocated: [0] });
    m.check();
    m.allocate(3); // ids 2 on page 0, then page 2 mapped (the free front), page 1 prefetched
    expect(m.takeEvents()).toEqual([map(2), map(1)]);
    m.sleep();
    expect(m.sleeping).toBe(true);
    expect(m.takeEvents()).toEqual([unmap(1), unmap(0), unmap(2)]);
    expect(() => m.allocate(1)).toThrow(/asleep/);
    m.check();
    m.wakeup();
    expect(m.takeEvents()).toEqual([map(1), map(0), map(2)]);
    m.check();
  });

  it('validates its options', () => {
    expect(() => mgr({ blockBytes: 11 })).toThrow(/options.blockBytes = 11 is larger than options.pageSize = 10/);
    expect(() => mgr({ numLayers: 0 })).toThrow(/options.numLayers must be >= 1, got 0/);
    expect(() => mgr({ numPhysicalPages: 1 })).toThrow(/options.numPhysicalPages must be in \[2, /);
    expect(() => mgr({ minReservedPages: 4, maxReservedPages: 2 })).toThrow(/options.maxReservedPages must be >= 4, got 2/);
    expect(() => mgr({ minReservedPages: 100, maxReservedPages: undefined })).toThrow(
      new RangeError('options.minReservedPages = 100 is more than maxReservedPages (32 by default); give maxReservedPages too'),
    );
    expect(() => mgr({ pages: 3 })).toThrow(/unknown option "pages"/);
    const m = mgr();
    m.reservePaddingBlocks();
    expect(() => m.reservePaddingBlocks()).toThrow(/already reserved/);
    expect(() => m.allocate(-1)).toThrow(/n must be >= 0, got -1/);
  });
});

describe('BlockManagerPool with enableXtensor', () => {
  const opts = { numBlocks: 10, blockSize: 4, enableXtensor: true, numLayers: 1, slotSize: 2, pageSize: 12 };
  // blockBytes = 4 * 2 / 2 = 4: pages of 12 bytes hold 3 blocks each, ids 0..9 on pages 0..3.

  it('allocates sequences on mapped pages, with no prefix cache', () => {
    const p = new BlockManagerPool(opts);
    expect(p.enablePrefixCache).toBe(false);
    const x = p.managers[0] as XTensorBlockManagerImpl;
    expect(x.takeEvents().map((e) => [e.type, e.page])).toEqual([['map', 0], ['map', 1], ['map', 2], ['map', 3]]);
    const s = new Sequence([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(p.allocate(s)).toBe(true);
    expect([...s.blockTable]).toEqual([1, 2, 3]);
    expect(p.numUsedBlocks()).toEqual([4]);
    p.check();
    s.kvCachedTokens = 9;
    p.deallocate(s);
    expect(p.numUsedBlocks()).toEqual([1]);
    expect(p.numBlocksInPrefixCache()).toEqual([0]);
    const big = new Sequence(new Array(40).fill(7));
    expect(p.allocate(big)).toBe(false);
    expect(big.numBlocks).toBe(0);
    p.check();
    p.dispose();
  });

  it('validates the XTensor options', () => {
    expect(() => new BlockManagerPool({ ...opts, numLayers: undefined })).toThrow(/options.numLayers must be a number, got undefined/);
    expect(() => new BlockManagerPool({ ...opts, enableXtensor: 1 as never })).toThrow(/^options.enableXtensor must be a boolean, got 1/);
    expect(() => new BlockManagerPool({ ...opts, slotSize: 0 })).toThrow(/^options.slotSize must be >= 1, got 0/);
    new BlockManagerPool({ numBlocks: 8, blockSize: 4, enableXtensor: false }).dispose(); // said off, nothing else given: a plain pool
    expect(() => new BlockManagerPool({ ...opts, slotSize: 1, blockSize: 3 })).toThrow(/must be even/);
    expect(() => new BlockManagerPool({ ...opts, enablePrefixCache: true })).toThrow(/enablePrefixCache cannot be true on xtensor ranks: XTensor blocks have no prefix cache/);
    expect(() => new BlockManagerPool({ ...opts, pageSize: 3 })).toThrow(/options.blockBytes = 4 is larger than options.pageSize = 3/);
  });
});

describe('BlockManagerPool with enableXtensor, randomized', () => {
  type Op = { kind: 'new'; len: number } | { kind: 'allocate' | 'decode' | 'finish' | 'fork'; pick: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('new' as const), len: fc.nat({ max: 30 }) }),
    fc.record({ kind: fc.constantFrom('allocate' as const, 'decode' as const, 'finish' as const, 'fork' as const), pick: fc.nat() }),
  );

  it('keeps every block of every sequence on a mapped page of its rank, with check() after each step', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }),
        fc.integer({ min: 4, max: 40 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 2, max: 12 }),
        (ops, numBlocks, dpSize, pageSize) => {
          const p = new BlockManagerPool({ numBlocks, blockSize: 2, dpSize, enableXtensor: true, numLayers: 1, slotSize: 2, pageSize });
          const seqs: Sequence[] = [];
          const mappedOk = () => {
            for (const s of seqs) {
              if (s.numBlocks === 0) continue;
              const x = p.managers[s.dpRank] as XTensorBlockManagerImpl;
              const allocated = new Set(x.pageStates().allocated);
              for (const id of s.blockTable) expect(allocated.has(x.pageOf(id))).toBe(true);
            }
          };
          for (const op of ops) {
            if (op.kind === 'new') seqs.push(new Sequence(Array.from({ length: op.len }, (_, i) => i)));
            else if (seqs.length > 0) {
              const s = seqs[op.pick % seqs.length]!;
              const before = [...s.blockTable];
              if (op.kind === 'allocate' || op.kind === 'decode') {
                if (op.kind === 'decode' && s.numBlocks > 0) s.appendToken(1);
                if (!p.allocate(s)) expect([...s.blockTable]).toEqual(before);
              } else if (op.kind === 'finish') p.deallocate(s);
              else if (s.dpRank >= 0) seqs.push(s.fork());
            }
            p.check();
            mappedOk();
          }
          for (const s of seqs) p.deallocate(s);
          p.check();
          expect(p.numUsedBlocks()).toEqual(new Array(dpSize).fill(1)); // the padding block of each rank
          p.dispose();
        },
      ),
      { numRuns: fewer(150) },
    );
  });
});

// check() is what the XTensor differentials lean on; here it must see state
// broken behind its back (through the state's arrays, as no public call can).
describe('check() on a corrupted XTensor manager', () => {
  it('names what is inconsistent, then passes again once repaired', () => {
    const m = mgr({ numBlocks: 100, minReservedPages: 0, maxReservedPages: 0 });
    const st = (m as unknown as { st: XTensorState }).st;
    const i = st.i32;
    m.recordEvents(true);
    m.reservePaddingBlocks();
    const held = m.allocate(4)!; // ids 1, 2 on page 0 (0 is padding), 4, 5 on page 1
    m.deallocate([held[3]!]); // page 1 has a free id again
    m.check();
    const broken = (words: Int32Array, at: number, value: number, message: RegExp) => expectCheckCatches(words, at, value, () => m.check(), message);
    const fail = (what: string) => new RegExp(`^kvpool: XTensor state is inconsistent: ${what}$`);
    broken(i, W_FREE_PAGES_LEN, st.freePages.length + 1, fail("the free page queue's head or length is out of range"));
    broken(i, W_EV_HEAD, -1, fail("the event queue's head or length is out of range"));
    broken(i, W_FREE_PAGES_LEN, i[W_FREE_PAGES_LEN]! - 1, fail('a usable page is in no allocator list'));
    broken(st.freePages, i[W_FREE_PAGES_HEAD]!, 99, fail('page 99 holds no block but is free'));
    broken(i, W_ALLOCATED_PAGES, i[W_ALLOCATED_PAGES]! + 1, fail('the allocated-page count is wrong'));
    broken(st.pageAlloc, 5, 1, fail('page 5 is both free and allocated'));
    broken(st.pageState, 5, 2, fail('pages in use differ from the allocated pages'));
    broken(st.pageLen, 1, 0, fail('page 1 is in the wrong list'));
    broken(st.pageHead, 1, st.pageCount[1]!, fail("page 1's queue head is out of range"));
    const freeOnPage1 = st.ring[st.pageFirst[1]! + st.pageHead[1]!]!;
    broken(st.pageOfId, freeOnPage1, 0, fail(`page 1 lists free id ${freeOnPage1} wrongly`));
    broken(st.availBits, 0, st.availBits[0]! | (1 << 31), fail('the avail set has bits past the last page'));
    broken(st.ref, freeOnPage1, 1, fail(`block ${freeOnPage1} is not handed out but has 1 holders`));
    broken(st.ref, held[0]!, -1, fail(`block ${held[0]} is handed out but has -1 holders`));
    broken(st.events, i[W_EV_HEAD]!, 99 + 1, fail('an event names page 99, which holds no block'));
    m.deallocate(held.subarray(0, 3));
    m.check();
  });
});

describe('XTensor calls at their edges', () => {
  it('hands out the free id of a page past the first 32 (the avail set spans several words)', () => {
    const m = mgr({ numBlocks: 120, minReservedPages: 0, maxReservedPages: 0 });
    m.check(); // every page free: the free-page queue is full
    m.reservePaddingBlocks();
    const all: number[] = [];
    for (let a = m.allocate(1); a !== null; a = m.allocate(1)) all.push(a[0]!);
    expect(m.pageOf(all[all.length - 1]!)).toBe(35); // every page in use, up to the last
    const id = all.find((x) => m.pageOf(x) === 33)!;
    m.deallocate([id]);
    expect([...m.allocate(1)!]).toEqual([id]);
    m.check();
  });

  it('refuses what is out of range by name, and changes nothing', () => {
    const m = mgr();
    m.reservePaddingBlocks();
    const a = m.allocate(2)!;
    expect(() => m.pageOf(10)).toThrow(/^id must be in \[0, 9\], got 10/);
    expect(() => m.recordEvents(1 as never)).toThrow(/^on must be a boolean, got 1/);
    expect(() => m.blockStates(new Uint8Array(9))).toThrow(/^out must be a Uint8Array of length >= 10, got one of length 9/);
    expect(() => m.blockStates([] as never)).toThrow(/^out must be a Uint8Array of length >= 10, got /);
    expect([...m.blockStates(new Uint8Array(10))]).toEqual([...m.blockStates()]); // exactly one entry per id
    const out = new Uint8Array(12).fill(7);
    expect(m.blockStates(out)).toBe(out);
    expect([...out]).toEqual([...m.blockStates(), 7, 7]);
    // The pool's own retain path checks every id before taking any: a free id, the padding block, one past the end.
    for (const bad of [3, 0, 10]) {
      expect(m.retainFrom(Int32Array.of(a[0]!, bad), 0, 2)).toBe(-1);
      expect(m.holderCounts()[a[0]!]).toBe(1);
    }
    m.check();
  });
});
