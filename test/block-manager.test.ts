// Scenario tests for BlockManagerImpl and SingleBlockManager (docs/managers.md;
// the manager's rules of docs/replay-kernel.md).

import { describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { META_SIZE } from '../bindings/core/abi.js';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { SingleBlockManager } from '../bindings/managers/single-block-manager.js';
import { ModelBlockManager } from '../model/block-manager-impl.js';
import { agree } from './support/agree.js';
import { blockTokens } from './support/block-tokens.js';
import { expectCheckCatches } from './support/corrupt.js';

const B = 4;
/** Tokens of `n` full blocks, block j filled with `base + j`. */
const chain = (n: number, base = 100, extra = 0): number[] => blockTokens(B, n, base, extra);

function mgr(numBlocks = 10, enablePrefixCache = true) {
  return new BlockManagerImpl({ numBlocks, blockSize: B, enablePrefixCache });
}

describe('BlockManagerImpl ids', () => {
  it('reserves id 0 as padding and hands out 1, 2, 3, ... from a fresh manager', () => {
    const m = mgr(6);
    expect(m.numTotalBlocks()).toBe(5);
    expect(m.numFreeBlocks()).toBe(5);
    expect([...m.allocate(3)!]).toEqual([1, 2, 3]);
    expect([...m.allocate(2)!]).toEqual([4, 5]);
    expect(m.allocate(1)).toBeNull();
    expect(m.numUsedBlocks()).toBe(5);
    expect(m.refCount(0)).toBe(1);
    m.check();
  });

  it('is a LIFO stack: ids released 1, 2, 3 come back 3, 2, 1', () => {
    const m = mgr();
    const ids = m.allocate(3)!;
    m.deallocate(ids);
    expect([...m.allocate(3)!]).toEqual([3, 2, 1]);
    m.check();
  });

  it('allocate(0) succeeds with no ids', () => {
    const m = mgr();
    expect(m.allocate(0)!.length).toBe(0);
    expect(m.numFreeBlocks()).toBe(9);
  });

  it('returns an id to the free stack only when its last holder lets go', () => {
    const m = mgr();
    const [a] = m.allocate(1)!;
    m.retain([a!]); // a forked sequence
    expect(m.refCount(a!)).toBe(2);
    m.deallocate([a!]);
    expect(m.numFreeBlocks()).toBe(8);
    expect(m.numUsedBlocks()).toBe(1);
    m.deallocate([a!]);
    expect(m.numFreeBlocks()).toBe(9);
    expect(m.numUsedBlocks()).toBe(0);
    m.check();
  });

  it('counts a duplicated id in one deallocate twice', () => {
    const m = mgr();
    const [a] = m.allocate(1)!;
    m.retain([a!]);
    m.deallocate([a!, a!]);
    expect(m.refCount(a!)).toBe(0);
    expect(m.numFreeBlocks()).toBe(9);
  });
});

describe('BlockManagerImpl prefix cache', () => {
  it('evicts hundreds of blocks in one call as the model does, past stale and held entries in the recency order', () => {
    // The core takes victims from its recency ring a chunk at a time; one
    // call here spans several chunks, with re-touched (stale) and held
    // (parked) entries among them and an event recorded per removal.
    const N = 600;
    const core = new BlockManagerImpl({ numBlocks: N, blockSize: B });
    core.recordEvents(true);
    const model = new ModelBlockManager({ numBlocks: N, blockSize: B });
    const prompts = Array.from({ length: 20 }, (_, i) => chain(25, 1000 * (i + 1)));
    for (const t of prompts) {
      const a = core.allocate(25)!;
      agree(Array.from(a), model.allocate(25));
      agree(core.cache(t, a), model.cache(t, Array.from(a)));
      core.deallocate(a);
      model.deallocate(Array.from(a));
    }
    const held: number[] = [];
    for (const [i, t] of prompts.entries()) {
      if (i % 3 !== 0) continue;
      // A match re-touches the prefix: its old ring entries go stale.
      const hits = Array.from(core.allocateShared(t.slice(0, 10 * B)));
      agree(hits, model.allocateShared(t.slice(0, 10 * B)));
      if (i % 2 === 0) held.push(...hits);
      else {
        core.deallocate(hits);
        model.deallocate(hits);
      }
    }
    core.drainEvents();
    const n = core.evict(400);
    expect(n).toBe(model.evict(400));
    expect(n).toBeGreaterThan(200);
    agree(Array.from(core.lruOrder()), model.prefix.lruOrder(), 'eviction order');
    agree(Array.from({ length: N }, (_, id) => core.refCount(id)), model.ref, 'reference counts');
    agree(Array.from(core.allocate(N - 1 - held.length - core.numBlocksInPrefixCache())!), model.allocate(N - 1 - held.length - model.numBlocksInPrefixCache()), 'free stack');
    expect(core.drainEvents().filter((e) => e.type === 'removed').length).toBe(n);
    core.check();
  });

  it('deallocate is not free: a cached block stays resident until evicted', () => {
    const m = mgr();
    const t = chain(2);
    const ids = m.allocate(2)!;
    expect(m.cache(t, ids)).toBe(2);
    expect(m.refCount(ids[0]!)).toBe(2); // the sequence and the cache
    m.deallocate(ids);
    expect(m.numFreeBlocks()).toBe(7);
    expect(m.numUsedBlocks()).toBe(0);
    expect(m.numBlocksInPrefixCache()).toBe(2);
    expect(m.refCount(ids[0]!)).toBe(1);
    expect(m.evict(5)).toBe(2);
    expect(m.numFreeBlocks()).toBe(9);
    expect(m.numBlocksInPrefixCache()).toBe(0);
    m.check();
  });

  it('matches full blocks from the start, stops at the first miss, and adds a reference to each hit', () => {
    const m = mgr();
    const t = chain(3);
    const ids = m.allocate(3)!;
    m.cache(t, ids);
    m.deallocate(ids);
    const other = chain(3);
    other[B * 1] = 999; // block 1 differs, so block 2 cannot match either
    expect([...m.allocateShared(other)]).toEqual([ids[0]]);
    expect([...m.allocateShared(t.concat([7, 7]))]).toEqual([...ids]);
    expect(m.refCount(ids[0]!)).toBe(3);
    expect(m.numUsedBlocks()).toBe(3);
    m.check();
  });

  it('never shares blocks across different parents (the hash chains)', () => {
    // Two chains cached: [P, X] and [Q, Y]. A prompt [Q, X] matches Q, and
    // then X -- cached, but under P -- must miss: without chaining it would hit.
    const m = mgr();
    const p = chain(1, 100); // block P
    const q = chain(1, 200); // block Q
    const x = chain(1, 300); // block X
    const y = chain(1, 400); // block Y
    const a = m.allocate(2)!;
    const b = m.allocate(2)!;
    expect(m.cache([...p, ...x], a)).toBe(2);
    expect(m.cache([...q, ...y], b)).toBe(2);
    expect([...m.allocateShared([...q, ...x])]).toEqual([b[0]]);
    expect([...m.allocateShared([...p, ...x])]).toEqual([...a]); // X does hit after P
    m.check();
  });

  it('evicts chain tails first: a match leaves the root most recent', () => {
    const m = mgr(10);
    const t = chain(3);
    const ids = m.allocate(3)!;
    m.cache(t, ids);
    m.deallocate(ids);
    const hit = m.allocateShared(t);
    m.deallocate(hit);
    expect([...m.lruOrder()]).toEqual([ids[2], ids[1], ids[0]]);
    // Need 8 with 6 free: two evictions, deepest first; allocation gets them in reverse eviction order.
    const got = m.allocate(8)!;
    expect([...got.slice(0, 2)]).toEqual([ids[1], ids[2]]);
    expect(m.stats().blocksEvicted).toBe(2);
    m.check();
  });

  it('keeps the LRU order through many touches of the same entries (the recency ring packs itself)', () => {
    // 3 cached blocks in a manager of 8 ids: the ring holds 16 entries, and
    // every hit leaves a stale one behind, so 40 rounds pack it many times.
    const m = mgr(8);
    const a = m.allocate(2)!;
    const b = m.allocate(1)!;
    m.cache(chain(2), a);
    m.cache(chain(1, 500), b);
    m.deallocate(a);
    m.deallocate(b);
    for (let round = 0; round < 40; round++) {
      const first = round % 2 === 0 ? chain(2) : chain(1, 500);
      m.deallocate(m.allocateShared(first));
      m.check();
      const expected = round % 2 === 0 ? [b[0], a[1], a[0]] : [a[1], a[0], b[0]];
      expect([...m.lruOrder()]).toEqual(expected);
    }
    // Eviction follows that order: b's block is the least recent after an odd round.
    expect([...m.allocate(5)!].slice(0, 1)).toEqual([a[1]]);
    expect(m.stats().blocksEvicted).toBe(1);
    m.check();
  });

  it('an insert batch longer than the recency ring still makes its entry the most recent', () => {
    // 3 ids: a ring of 16 entries. One held id listed for 20 blocks: the first
    // block caches it, the others find it cached under another key.
    const m = new BlockManagerImpl({ numBlocks: 3, blockSize: B });
    const [a] = m.allocate(1)!;
    m.cache(chain(1, 500), [a!]);
    m.deallocate([a!]);
    const [b] = m.allocate(1)!;
    expect(m.cache(chain(20), new Array(20).fill(b))).toBe(1);
    m.check();
    m.deallocate([b!]);
    expect([...m.lruOrder()]).toEqual([a, b]); // b touched after a
    expect([...m.allocateShared(chain(20))]).toEqual([b]);
    m.check();
  });

  it('an insert told that unstamped blocks are known hashes them from the tokens instead', () => {
    // insertFrom's `known` (internal): the pool passes the blocks it stamped;
    // a block given as known that carries no hash is hashed from the tokens.
    const m = mgr(10);
    const t = chain(3);
    const ids = m.allocate(3)!;
    expect(m.insertFrom(t, ids, 0, 3, 0, null, 2)).toBe(3);
    m.check();
    m.deallocate(ids);
    expect([...m.allocateShared(t)]).toEqual([...ids]);
    m.check();
  });

  it('a long match (staged in windows) leaves the same LRU order as one walk', () => {
    const m = new BlockManagerImpl({ numBlocks: 200, blockSize: 1 });
    const t = Array.from({ length: 100 }, (_, i) => i);
    const ids = m.allocate(100)!;
    m.cache(t, ids);
    m.deallocate(ids);
    const hit = m.allocateShared(t);
    expect([...hit]).toEqual([...ids]);
    expect([...m.lruOrder()]).toEqual([...ids].reverse());
    expect(m.stats()).toMatchObject({ matchCalls: 1, blocksQueried: 100, blocksHit: 100 });
    m.deallocate(hit);
    const partial = t.slice(0, 70).concat([-5, -6]);
    expect(m.allocateShared(partial).length).toBe(70);
    expect(m.stats()).toMatchObject({ matchCalls: 2, blocksQueried: 172, blocksHit: 170 });
    m.check();
  });

  it('skips blocks a sequence still holds when evicting', () => {
    const m = mgr(6);
    const t = chain(2);
    const ids = m.allocate(2)!;
    m.cache(t, ids);
    m.deallocate([ids[1]!]); // block 1 only cached; block 0 still held
    const got = m.allocate(4)!;
    expect(got).not.toBeNull();
    expect(got[0]).toBe(ids[1]);
    expect(m.numBlocksInPrefixCache()).toBe(1);
    m.check();
  });

  it('a failed allocation keeps what it evicted on the way', () => {
    const m = mgr(6);
    const t = chain(2);
    const ids = m.allocate(2)!;
    m.cache(t, ids);
    m.deallocate(ids);
    const held = m.allocate(3)!;
    expect(held.length).toBe(3);
    expect(m.allocate(3)).toBeNull(); // 0 free + 2 evictable < 3
    expect(m.numBlocksInPrefixCache()).toBe(0);
    expect(m.numFreeBlocks()).toBe(2);
    expect(m.stats().allocationFailures).toBe(1);
    m.check();
  });

  it('keeps the cached block on a duplicate insert; the caller\'s copy is freed on release', () => {
    const m = mgr();
    const t = chain(2);
    const a = m.allocate(2)!;
    m.cache(t, a);
    const b = m.allocate(2)!;
    expect(m.cache(t, b)).toBe(0);
    expect(m.refCount(b[0]!)).toBe(1);
    m.deallocate(b);
    expect(m.numFreeBlocks()).toBe(7);
    expect([...m.allocateShared(t)]).toEqual([...a]);
    m.check();
  });

  it('insert after a shared prefix refreshes only the new part (the parent can end older)', () => {
    const m = mgr(12);
    const t = chain(3);
    const ids = m.allocate(2)!;
    m.cache(t.slice(0, 2 * B), ids);
    m.deallocate(ids);
    const shared = m.allocateShared(t); // both hit
    const own = m.allocate(1)!;
    const table = [...shared, ...own];
    m.cache(t, table, 2);
    m.deallocate(table);
    // Only block 2 was visited by the insert: it is now the most recent.
    expect([...m.lruOrder()]).toEqual([shared[1], shared[0], own[0]]);
    m.check();
  });

  it('continues a match after existing shared blocks using their stamped hash', () => {
    const m = mgr();
    const t = chain(3);
    const ids = m.allocate(3)!;
    m.cache(t, ids);
    const first = m.allocateShared(t.slice(0, B));
    const rest = m.allocateShared(t, first);
    expect([...rest]).toEqual([ids[1], ids[2]]);
    m.check();
  });

  it('derives the parent hash from the tokens when the existing block has none', () => {
    const m = mgr();
    const t = chain(2);
    const ids = m.allocate(2)!;
    m.cache(t, ids);
    const mine = m.allocate(1)!; // never hashed
    expect([...m.allocateShared(t, mine)]).toEqual([ids[1]]);
  });

  it('caches nothing with the prefix cache off and never evicts', () => {
    const m = mgr(6, false);
    const t = chain(2);
    const ids = m.allocate(2)!;
    expect(m.cache(t, ids)).toBe(0);
    expect(m.allocateShared(t).length).toBe(0);
    expect(m.numBlocksInPrefixCache()).toBe(0);
    m.deallocate(ids);
    expect(m.numFreeBlocks()).toBe(5);
    m.check();
  });

  it('counts queries, hits, inserts and evictions', () => {
    const m = mgr();
    const t = chain(3);
    const ids = m.allocate(3)!;
    m.cache(t, ids);
    m.deallocate(ids);
    m.deallocate(m.allocateShared(chain(2).concat(chain(1, 500))));
    const s = m.stats();
    expect(s).toMatchObject({ matchCalls: 1, blocksQueried: 3, blocksHit: 2, blocksInserted: 3, blocksAllocated: 3 });
    expect(s.numEvictableBlocks).toBe(3);
  });
});

describe('bad input leaves the manager unchanged', () => {
  const bad: Array<[string, (m: BlockManagerImpl, held: Int32Array) => unknown, RegExp]> = [
    ['fractional count', (m) => m.allocate(1.5), /n must be an integer, got 1.5/],
    ['negative count', (m) => m.allocate(-1), /n must be >= 0, got -1/],
    ['NaN count', (m) => m.allocate(NaN), /n must be an integer, got NaN/],
    ['string count', (m) => m.allocate('2' as unknown as number), /n must be a number/],
    ['already free id', (m) => m.deallocate([5]), /ids\[0\] = 5 has no holder left \(it is free\)/],
    ['double release', (m, h) => m.deallocate([h[0]!, h[0]!]), /ids\[1\] = \d+ has no holder left/],
    ['padding id', (m) => m.deallocate([0]), /ids\[0\] = 0 is the padding block/],
    ['retain padding', (m) => m.retain([0]), /ids\[0\] = 0 is the padding block/],
    ['id out of range', (m) => m.deallocate([10]), /ids\[0\] = 10 is out of range: this manager's ids are 1..9/],
    ['negative id', (m) => m.retain([-3]), /ids\[0\] = -3 is out of range/],
    ['fractional id', (m) => m.deallocate([1.5]), /ids\[0\] must be an int32 integer, got 1.5/],
    ['retain a free id', (m) => m.retain([7]), /ids\[0\] = 7 has no holder left \(it is free\)/],
    ['non-integer token', (m) => m.allocateShared([1, 2, 3, 4.5]), /tokens\[3\] must be an int32 integer, got 4.5/],
    ['NaN token', (m) => m.allocateShared([NaN]), /tokens\[0\] must be an int32 integer, got NaN/],
    ['token above int32', (m) => m.allocateShared([2 ** 31]), /tokens\[0\] must be an int32 integer, got 2147483648/],
    ['token below int32', (m) => m.allocateShared([-(2 ** 31) - 1]), /tokens\[0\] must be an int32 integer/],
    ['tokens not an array', (m) => m.allocateShared(5 as unknown as number[]), /tokens must be an Int32Array or an array/],
    ['too many ids for tokens', (m, h) => m.cache(chain(1), h), /ids has 2 blocks but tokens \(4\) fill at most 1 blocks/],
    ['existing count above blocks', (m, h) => m.cache(chain(2), h, 3), /existingSharedCount must be in \[0, 2\], got 3/],
    ['cache a free id', (m) => m.cache(chain(1), [6]), /ids\[0\] = 6 has no holder left \(it is free\)/],
    ['existing beyond tokens', (m, h) => m.allocateShared(chain(1), h), /existingShared has 2 ids but tokens hold only 1 full blocks/],
    ['evict negative', (m) => m.evict(-1), /n must be >= 0/],
  ];
  for (const [name, call, msg] of bad) {
    it(name, () => {
      const m = mgr(10);
      const held = m.allocate(2)!;
      m.cache(chain(2), held);
      const before = { free: [...m.freeIds()], lru: [...m.lruOrder()], stats: m.stats(), refs: [...held].map((id) => m.refCount(id)) };
      expect(() => call(m, held)).toThrow(msg);
      expect({ free: [...m.freeIds()], lru: [...m.lruOrder()], stats: m.stats(), refs: [...held].map((id) => m.refCount(id)) }).toEqual(before);
      m.check();
    });
  }

  it('a release that fails midway leaves earlier ids untouched', () => {
    const m = mgr();
    const ids = m.allocate(3)!;
    expect(() => m.deallocate([ids[0]!, ids[1]!, 9])).toThrow(/ids\[2\] = 9 has no holder left/);
    expect([...ids].map((id) => m.refCount(id))).toEqual([1, 1, 1]);
    expect(m.numFreeBlocks()).toBe(6);
  });

  it('a release naming an id twice is checked as a whole too', () => {
    const m = mgr();
    const ids = m.allocate(2)!;
    m.retain([ids[0]!]);
    // ids[0] has two holders: listed twice it is fine, a third time it is not.
    expect(() => m.deallocate([ids[0]!, ids[1]!, ids[0]!, ids[0]!])).toThrow(/ids\[3\] = \d+ has no holder left/);
    expect([...ids].map((id) => m.refCount(id))).toEqual([2, 1]);
    expect(() => m.deallocate([ids[0]!, ids[0]!, 9])).toThrow(/ids\[2\] = 9 has no holder left/);
    expect([...ids].map((id) => m.refCount(id))).toEqual([2, 1]);
    m.check();
    m.deallocate([ids[0]!, ids[1]!, ids[0]!]);
    expect(m.numFreeBlocks()).toBe(9);
    expect([...m.freeIds()].slice(-2)).toEqual([ids[1], ids[0]]); // freed as their last holders let go, in list order
    m.check();
  });

  it('rejects cached-only ids as having no holder', () => {
    const m = mgr();
    const ids = m.allocate(1)!;
    m.cache(chain(1), ids);
    m.deallocate(ids);
    expect(() => m.deallocate(ids)).toThrow(/only the prefix cache holds it/);
  });

  it('rejects bad options', () => {
    expect(() => new BlockManagerImpl({ numBlocks: 1, blockSize: 4 })).toThrow(/options.numBlocks must be >= 2, got 1/);
    expect(() => new BlockManagerImpl({ numBlocks: 8, blockSize: 0 })).toThrow(/options.blockSize must be >= 1, got 0/);
    expect(() => new BlockManagerImpl({ numBlocks: 8.5, blockSize: 4 })).toThrow(/options.numBlocks must be an integer/);
    expect(() => new BlockManagerImpl({ numBlocks: 8, blockSize: 4, seed: -1 })).toThrow(/options.seed must be in \[0, 2\^64\)/);
    expect(() => new BlockManagerImpl({ numBlocks: 8, blockSize: 4, enablePrefixCache: 1 as unknown as boolean })).toThrow(/enablePrefixCache must be a boolean/);
    expect(() => new BlockManagerImpl({ numBlocks: 8, blockSize: 4, numblocks: 3 } as never)).toThrow(/unknown option "numblocks"/);
    expect(() => new BlockManagerImpl(null as never)).toThrow(TypeError);
  });

  it('reports exhausted Wasm memory as a clear error and keeps working', () => {
    expect(() => new BlockManagerImpl({ numBlocks: 2 ** 31 - 1, blockSize: 16 })).toThrow(/Wasm memory exhausted creating a manager of 2147483647 blocks/);
    const m = mgr();
    expect([...m.allocate(2)!]).toEqual([1, 2]);
    m.check();
  });

  it('refuses calls after dispose', () => {
    const m = mgr();
    m.dispose();
    expect(() => m.allocate(1)).toThrow(/disposed/);
  });
});

// check() is what every differential test leans on; here it must see state
// broken behind its back (through the core's memory, as no public call can).
describe('check() on a corrupted manager', () => {
  it('names what is inconsistent and the id, then passes again once repaired', () => {
    const m = mgr(8);
    const rt = plainCore();
    const ptr = (m as unknown as { ptr: number }).ptr;
    const refs = rt.ex.mgr_refs_ptr(ptr) >>> 2;
    const W = META_SIZE / 4; // an id's record, in words
    expect(rt.ex.mgr_refs_stride(ptr)).toBe(META_SIZE);
    const broken = (at: number, value: number, message: RegExp) => expectCheckCatches(rt.i32, at, value, () => m.check(), message);
    broken(refs + 3 * W, 1, /^kvpool: manager state is inconsistent: a free id still has references or is cached \(id 3\)$/);
    broken(refs + 0, 2, /^kvpool: manager state is inconsistent: padding block 0 is not reserved \(id 0\)$/);
    broken(ptr >>> 2, 0, /^kvpool: manager state is inconsistent: the header is not a live manager \(destroyed, or not a header at all\)$/);
    const ids = m.allocate(2)!;
    broken(refs + ids[1]! * W, 0, /^kvpool: manager state is inconsistent: an id is neither free nor referenced \(lost\) \(id 2\)$/);
    m.deallocate(ids);
    expect(m.numFreeBlocks()).toBe(7);
  });

  it('sees an entry out of the recency ring that is newer than the ring (a parked one, restamped)', () => {
    const m = mgr(8);
    const rt = plainCore();
    const ptr = (m as unknown as { ptr: number }).ptr;
    const t = chain(3);
    const held = [...m.allocate(3)!];
    m.cache(t, held);
    const other = [...m.allocate(4)!];
    m.cache(chain(4).map((x) => x + 1000), other);
    m.deallocate(other);
    // Evicting walks past the three held entries (parks them) to the four released ones.
    expect(m.evict(1)).toBe(1);
    m.check();
    const stamps = rt.ex.mgr_stamps_ptr(ptr) >>> 2;
    const W = META_SIZE / 4; // an id's record, in words
    // A parked entry is older than every entry in the ring; one given a newer stamp breaks the order.
    const newest = Math.max(...other.filter((id) => m.refCount(id) > 0).map((id) => rt.i32[stamps + id * W]!));
    expectCheckCatches(rt.i32, stamps + held[0]! * W, newest, () => m.check(), /eviction order \(recency ring or side heap\) is corrupt/);
    m.deallocate(held);
    m.check();
  });
});

describe('the async constructors', () => {
  it('BlockManagerImpl.create and SingleBlockManager.create give working managers and refuse bad options by name', async () => {
    const m = await BlockManagerImpl.create({ numBlocks: 8, blockSize: B });
    expect([...m.allocate(2)!]).toEqual([1, 2]);
    m.check();
    m.dispose();
    await expect(BlockManagerImpl.create({ numBlocks: 1, blockSize: B })).rejects.toThrow(/^options.numBlocks must be >= 2, got 1/);
    // An eviction order needs a cache to order.
    expect(() => new BlockManagerImpl({ numBlocks: 8, blockSize: B, enablePrefixCache: false, evictionPolicy: 'lfu' })).toThrow(
      /^options.evictionPolicy cannot be 'lfu' without a prefix cache/,
    );
    const s = await SingleBlockManager.create({ numBlocks: 4 });
    expect([...s.allocate(1)!]).toEqual([1]);
    s.dispose();
    await expect(SingleBlockManager.create({ numBlocks: 1 })).rejects.toThrow(/numBlocks must be >= 2, got 1/);
  });
});

describe('cache() after blocks that carry no hash', () => {
  it('keys each new block by the chain of all the tokens before it', () => {
    const m = mgr(16);
    const t = chain(6);
    const ids = [...m.allocate(6)!];
    // The first three count as shared but were never cached: their hashes come from the tokens.
    m.cache(t, ids, 3);
    const h = hashBlocks(t, B);
    for (const k of [3, 4, 5]) expect([...m.blockHash(ids[k]!)!]).toEqual([...h.subarray(16 * k, 16 * k + 16)]);
    expect(m.blockHash(ids[2]!)).toBeNull();
    expect(m.numBlocksInPrefixCache()).toBe(3);
    m.check();
  });
});

describe('cache() and allocateShared() with arguments they cannot take', () => {
  it('name the argument, and change nothing', () => {
    const m = mgr(8);
    const ids = [...m.allocate(2)!];
    expect(() => m.cache(chain(2), [ids[0]!, 0])).toThrow(/^ids\[1\] = 0 is the padding block, which is never handed out/);
    expect(() => m.cache([1.5], ids)).toThrow(/^tokens\[0\] must be an int32 integer/);
    expect(() => m.cache(chain(2), [0.5])).toThrow(/^ids\[0\] must be an int32 integer/);
    expect(() => m.cache(chain(2), ids, 0, [{ priority: 200 }])).toThrow(/^retention\[0\].priority must be in \[0, 100\]/);
    expect(() => m.allocateShared(chain(2), [0.5])).toThrow(/^existingShared\[0\] must be an int32 integer/);
    expect(() => m.allocateShared(chain(2), [0])).toThrow(/^existingShared\[0\] = 0 is the padding block/);
    expect(() => m.cache(chain(2), [ids[0]!, 8])).toThrow(/^ids\[1\] = 8 is out of range: this manager's ids are 1\.\.7$/);
    expect(() => m.cache(chain(2), [-1])).toThrow(/^ids\[0\] = -1 is out of range: this manager's ids are 1\.\.7$/);
    expect(() => m.cacheByHashes([0.5], new Uint8Array(16))).toThrow(/^ids\[0\] must be an int32 integer/);
    expect(() => m.retain([0.5])).toThrow(/^ids\[0\] must be an int32 integer/);
    expect(() => m.blockHash(8)).toThrow(/^id must be in \[0, 7\], got 8/);
    expect(() => m.refCount(-1)).toThrow(/^id must be in \[0, 7\], got -1/);
    expect(m.numBlocksInPrefixCache()).toBe(0);
    m.check();
  });
});

describe('lruOrder', () => {
  it('is the order eviction takes, block by block, for a cache of hundreds of blocks', () => {
    const m = mgr(400);
    for (const [n, base] of [[120, 1000], [150, 5000], [30, 9000]] as const) {
      const ids = m.allocate(n)!;
      m.cache(chain(n, base), ids);
      m.deallocate(n === 150 ? [...ids].reverse() : ids);
    }
    m.allocateShared(chain(40, 1000)).forEach((id) => m.deallocate([id])); // touched again: now the newest
    const order = [...m.lruOrder()];
    expect(order.length).toBe(300);
    const evicted: number[] = [];
    for (let k = 0; k < 300; k++) {
      const before = m.blockStates();
      expect(m.evict(1)).toBe(1);
      const after = m.blockStates();
      evicted.push(after.findIndex((st, id) => st !== before[id]));
    }
    expect(evicted).toEqual(order);
  });
});

describe('long chains', () => {
  it('allocateShared finds every block of a cached chain longer than its first result buffer', () => {
    const n = 300; // the first buffer holds 64 hits; it grows for longer chains
    const m = mgr(n + 2);
    const t = chain(n);
    const ids = m.allocate(n)!;
    expect(m.cache(t, ids)).toBe(n);
    m.deallocate(ids);
    expect([...m.allocateShared(t)]).toEqual([...ids]);
    m.check();
  });

  it('retention given under LRU stages nothing, and leaves the core (and so every hash) as it was', () => {
    const before = [...hashBlocks(chain(3), B)];
    const m = mgr(200);
    const t = chain(190, 7000);
    const ids = m.allocate(190)!;
    expect(m.cache(t, ids, 0, [{ priority: 90 }])).toBe(190);
    expect([...hashBlocks(chain(3), B)]).toEqual(before);
    expect([...m.blockHash(ids[0]!)!]).toEqual([...hashBlocks(t.slice(0, B), B)]);
    m.check();
  });
});

describe('SingleBlockManager', () => {
  it('hands out single ids 1, 2, ... and reuses them LIFO; id 0 reserved', () => {
    const s = new SingleBlockManager({ numBlocks: 4 });
    expect(s.blockSize).toBe(1);
    expect(s.numTotalBlocks()).toBe(3);
    expect([...s.allocate(1)!, ...s.allocate(1)!]).toEqual([1, 2]);
    s.deallocate([1]);
    expect([...s.allocate(1)!]).toEqual([1]);
    expect(s.allocate(2)).toBeNull();
    s.check();
  });

  it('still checks what it is given to share or cache, naming the argument', () => {
    const s = new SingleBlockManager({ numBlocks: 4 });
    expect(() => s.allocateShared([0.5], [])).toThrow(/^tokens\[0\] must be an int32 integer/);
    expect(() => s.allocateShared([1], [0.5])).toThrow(/^existingShared\[0\] must be an int32 integer/);
    expect(() => s.cache([0.5], [])).toThrow(/^tokens\[0\] must be an int32 integer/);
    expect(() => s.cache([1], [0.5])).toThrow(/^ids\[0\] must be an int32 integer/);
    expect(() => s.cache([1], [], 0.5)).toThrow(/^existingSharedCount must be an integer/);
  });

  it('has no prefix cache', () => {
    const s = new SingleBlockManager({ numBlocks: 4 });
    const ids = s.allocate(2)!;
    expect(s.allocateShared([1, 2]).length).toBe(0);
    expect(s.cache([1, 2], ids)).toBe(0);
    expect(s.numBlocksInPrefixCache()).toBe(0);
    expect(s.evict(3)).toBe(0);
    s.deallocate(ids);
    expect(s.numFreeBlocks()).toBe(3);
    s.check();
  });

  it('rejects bad options and ids', () => {
    expect(() => new SingleBlockManager({ numBlocks: 1 })).toThrow(/numBlocks must be >= 2/);
    expect(() => new SingleBlockManager(null as never)).toThrow(/^options must be an object/);
    expect(() => new SingleBlockManager({ numBlocks: 4, blockSize: 2 } as never)).toThrow(/^options: unknown option "blockSize"/);
    const s = new SingleBlockManager({ numBlocks: 4 });
    expect(() => s.deallocate([1])).toThrow(/has no holder left \(it is free\)/);
    expect(() => s.allocateShared([0.5])).toThrow(/tokens\[0\]/);
  });

  it('keeps no prefix-cache arrays: about 9 bytes of core memory per id, not the ~53 of a cache', () => {
    const rt = plainCore();
    const before = rt.memory.buffer.byteLength;
    const n = 1 << 20;
    const s = new SingleBlockManager({ numBlocks: n });
    expect(rt.memory.buffer.byteLength - before).toBeLessThan(16 * n);
    s.dispose();
  });

  it('lives beside many managers in one core without recompiling', async () => {
    const many = Array.from({ length: 50 }, () => new SingleBlockManager({ numBlocks: 16 }));
    many.forEach((s, i) => expect([...s.allocate(1 + (i % 3))!][0]).toBe(1));
    const created = await BlockManagerImpl.create({ numBlocks: 4, blockSize: 2 });
    expect([...created.allocate(1)!]).toEqual([1]);
    many.forEach((s) => s.dispose());
  });
});
