// Scenario tests for Sequence and BlockManagerPool (docs/pool.md, docs/concepts.md).

import { describe, expect, it } from 'vitest';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ConcurrentXTensorBlockManagerImpl } from '../bindings/managers/xtensor-concurrent-block-manager-impl.js';
import { blockTokens } from './support/block-tokens.js';

const B = 4;
const prompt = (blocks: number, base = 100, extra = 0): number[] => blockTokens(B, blocks, base, extra);
function pool(numBlocks = 16, more: Partial<ConstructorParameters<typeof BlockManagerPool>[0]> = {}) {
  return new BlockManagerPool({ numBlocks, blockSize: B, ...more });
}
/** Runs a sequence to completion: prefill computed, then deallocate (caches its full blocks). */
function finish(p: BlockManagerPool, s: Sequence) {
  s.kvCachedTokens = s.numTokens;
  p.deallocate(s);
}

describe('Sequence', () => {
  it('refuses a computed-token count that is not a count of its tokens, keeping the old one', () => {
    const s = new Sequence([1, 2, 3]);
    s.kvCachedTokens = 2;
    expect(() => (s.kvCachedTokens = 1.5)).toThrow(/^kvCachedTokens must be an integer, got 1.5/);
    expect(() => (s.kvCachedTokens = -1)).toThrow(/^kvCachedTokens must be in \[0, 3\], got -1/);
    expect(() => (s.kvCachedTokens = 4)).toThrow(/^kvCachedTokens must be in \[0, 3\], got 4/);
    expect(s.kvCachedTokens).toBe(2);
  });

  it('fromBuffer of an empty buffer still grows as tokens are appended', () => {
    const s = Sequence.fromBuffer(new Int32Array(0));
    expect(s.numTokens).toBe(0);
    for (let i = 0; i < 20; i++) s.appendToken(i + 1);
    expect([...s.tokens]).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('an empty cacheSalt set on the sequence means no salt: it shares blocks with unsalted sequences', () => {
    const p = pool();
    const a = new Sequence(prompt(3));
    expect(p.allocate(a)).toBe(true);
    finish(p, a);
    const b = new Sequence(prompt(3));
    b.cacheSalt = '';
    expect(b.cacheSalt).toBe('');
    expect(p.allocate(b)).toBe(true);
    expect(b.kvCachedTokens).toBe(2 * B); // the hits, up to the last block the prompt recomputes
    const c = new Sequence(prompt(3));
    c.cacheSalt = 'x';
    expect(p.allocate(c)).toBe(true);
    expect(c.kvCachedTokens).toBe(0);
    p.check();
  });

  it('holds tokens, grows, and exposes its table as views', () => {
    const s = new Sequence([1, 2, 3]);
    expect(s.numTokens).toBe(3);
    expect(s.numPromptTokens).toBe(3);
    for (let i = 0; i < 40; i++) s.appendToken(i);
    expect(s.numTokens).toBe(43);
    expect(s.numPromptTokens).toBe(3);
    expect([...s.tokens.slice(0, 4)]).toEqual([1, 2, 3, 0]);
    expect(s.dpRank).toBe(-1);
    expect(s.singleBlockId).toBe(-1);
    expect(s.blockTable.length).toBe(0);
  });

  it('takes over a buffer without copying', () => {
    const buf = new Int32Array([5, 6, 7, 0, 0]);
    const s = Sequence.fromBuffer(buf, 3);
    expect([...s.tokens]).toEqual([5, 6, 7]);
    s.appendToken(8);
    expect(buf[3]).toBe(8);
    expect(() => Sequence.fromBuffer(buf, 6)).toThrow(/numTokens must be in \[0, 5\], got 6/);
  });

  it('rejects bad tokens and counts', () => {
    expect(() => new Sequence([1, 2.5])).toThrow(/prompt\[1\] must be an int32 integer, got 2.5/);
    const s = new Sequence([1]);
    expect(() => s.appendToken(2 ** 31)).toThrow(/token must be in \[-2147483648, 2147483647\], got 2147483648/);
    expect(() => (s.kvCachedTokens = 2)).toThrow(/kvCachedTokens must be in \[0, 1\], got 2/);
    expect(() => s.slotIds()).toThrow(/^slotIds: the sequence has not been placed in a pool/);
    expect(() => Sequence.fromBuffer([1, 2] as never)).toThrow(/buffer must be an Int32Array, got/);
  });

  it('options without a cacheSalt mean no salt', () => {
    expect(new Sequence([1], {}).cacheSalt).toBe('');
    expect(new Sequence([1], { cacheSalt: '' }).cacheSalt).toBe('');
    expect(new Sequence([1], { cacheSalt: 't' }).cacheSalt).toBe('t');
    expect(() => new Sequence([1], 5 as never)).toThrow(/^options must be an object, got 5/);
    expect(() => new Sequence([1], null as never)).toThrow(/^options must be an object, got null/);
  });
});

describe('BlockManagerPool allocate', () => {
  it('gives a new sequence a rank, a single id and its blocks', () => {
    const p = pool();
    const s = new Sequence(prompt(2, 100, 1));
    expect(p.allocate(s)).toBe(true);
    expect(s.dpRank).toBe(0);
    expect(s.singleBlockId).toBe(1);
    expect([...s.blockTable]).toEqual([1, 2, 3]);
    expect(s.sharedBlocks).toBe(0);
    expect(p.numUsedBlocks()).toEqual([3]);
    p.check();
  });

  it('maps token positions to slot ids', () => {
    const p = pool();
    const s = new Sequence(prompt(2, 100, 1));
    p.allocate(s);
    expect([...s.slotIds(3, 6)]).toEqual([1 * B + 3, 2 * B + 0, 2 * B + 1]);
    expect(() => s.slotIds(0, 13)).toThrow(/^end = 13 is beyond the 3 blocks of 4 tokens the sequence holds$/);
    expect([...s.slotIds(10, 12)]).toEqual([3 * B + 2, 3 * B + 3]); // up to the last slot it holds
    expect(() => s.slotIds(-1, 2)).toThrow(/^start must be >= 0, got -1/);
    expect(() => s.slotIds(3, 2)).toThrow(/^end must be >= 3, got 2/);
  });

  it('blockAt gives the id of a logical block, and refuses a position it does not hold', () => {
    const p = pool();
    const s = new Sequence(prompt(2, 100, 1));
    p.allocate(s);
    expect([0, 1, 2].map((i) => s.blockAt(i))).toEqual([...s.blockTable]);
    for (const bad of [-1, 3, 1.5, NaN]) expect(() => s.blockAt(bad)).toThrow(new RangeError(`i must be an integer in [0, 3), got ${bad}`));
  });

  it('a sequence made with an empty cacheSalt shares blocks with unsalted ones', () => {
    const p = pool();
    const a = new Sequence(prompt(3));
    expect(p.allocate(a)).toBe(true);
    finish(p, a);
    const b = new Sequence(prompt(3), { cacheSalt: '' });
    expect(p.allocate(b)).toBe(true);
    expect(b.sharedBlocks).toBe(2);
    p.check();
  });

  it('fork needs a placed sequence and an options object; the child swaps its last block only when asked', () => {
    const p = pool();
    expect(() => new Sequence([1]).fork()).toThrow(/^fork: the sequence has not been placed in a pool yet \(allocate it first\)$/);
    const s = new Sequence(prompt(1, 100, 2));
    expect(p.allocate(s)).toBe(true);
    expect(() => s.fork(null as never)).toThrow(new TypeError('options must be an object, got null'));
    expect(() => s.fork({ swapLastBlock: 1 as never })).toThrow(new TypeError('options.swapLastBlock must be a boolean, got 1'));
    const plain = s.fork();
    expect(plain.needsSwap).toBe(false);
    const swapping = s.fork({ swapLastBlock: true });
    expect(swapping.needsSwap).toBe(true);
    for (const c of [plain, swapping, s]) p.deallocate(c);
    p.check();
  });

  it('prefixHash and prefixHashes name themselves and their count when refused', () => {
    const p = pool();
    const s = new Sequence(prompt(2, 100, 1));
    expect(() => s.prefixHashes()).toThrow(/^prefixHashes: the sequence has not been placed in a pool yet/);
    expect(() => s.prefixHash(B)).toThrow(/^prefixHash: the sequence has not been placed in a pool yet/);
    p.allocate(s);
    expect(() => s.prefixHashes(10)).toThrow(/^numTokens must be in \[0, 9\], got 10/);
    expect(() => s.prefixHash(0)).toThrow(/^numTokens must be in \[4, 9\], got 0/);
    expect(() => s.prefixHash(6)).toThrow(/^numTokens must be a multiple of the block size 4, got 6/);
    expect(s.prefixHash(8)).toEqual(s.prefixHashes().slice(16, 32));
    expect(() => s.slotIds(0, 1, 0)).toThrow(/^slotIds: the sequence holds no composite block tables/);
  });

  it('decode steps add a block only when the last one is full', () => {
    const p = pool();
    const s = new Sequence(prompt(1, 100, 2)); // 6 tokens, 2 blocks
    p.allocate(s);
    s.kvCachedTokens = 6;
    s.appendToken(7);
    s.appendToken(8); // 8 tokens: still 2 blocks
    expect(p.allocate(s, s.numTokens)).toBe(true);
    expect(s.numBlocks).toBe(2);
    s.appendToken(9);
    expect(p.allocate(s, s.numTokens)).toBe(true);
    expect([...s.blockTable]).toEqual([1, 2, 3]);
    p.check();
  });

  it('reuses the prefix cache for a sequence that starts empty', () => {
    const p = pool();
    const a = new Sequence(prompt(3, 100, 1));
    p.allocate(a);
    finish(p, a);
    expect(p.numBlocksInPrefixCache()).toEqual([3]);
    expect(p.numUsedBlocks()).toEqual([0]);
    const b = new Sequence(prompt(3, 100, 2));
    expect(p.allocate(b)).toBe(true);
    expect(b.sharedBlocks).toBe(3);
    expect(b.kvCachedTokens).toBe(12);
    expect([...b.blockTable.slice(0, 3)]).toEqual([...a.blockTable.slice(0, 0)].concat([1, 2, 3]));
    expect(p.numUsedBlocks()).toEqual([4]);
    p.check();
  });

  it('an exact prompt hit gives back its last block, without a used-count drift', () => {
    const p = pool();
    const a = new Sequence(prompt(3));
    p.allocate(a);
    finish(p, a);
    const b = new Sequence(prompt(3));
    expect(p.allocate(b)).toBe(true);
    expect(b.sharedBlocks).toBe(2);
    expect(b.kvCachedTokens).toBe(8);
    expect(b.numBlocks).toBe(3);
    expect(b.blockTable[2]).not.toBe(3); // the last block is recomputed into a new one
    // Used: two shared + one new. The given-back block is only cached (the reference counts it too).
    expect(p.numUsedBlocks()).toEqual([3]);
    expect(p.stats()[0]!.numEvictableBlocks).toBe(1);
    p.check();
  });

  it('places a new sequence on the rank with the most free blocks, lowest rank on ties', () => {
    const p = pool(16, { dpSize: 3 });
    const a = new Sequence(prompt(3));
    p.allocate(a);
    expect(a.dpRank).toBe(0);
    const b = new Sequence(prompt(2, 300));
    p.allocate(b);
    expect(b.dpRank).toBe(1);
    const c = new Sequence(prompt(1, 500));
    p.allocate(c);
    expect(c.dpRank).toBe(2);
    const d = new Sequence(prompt(1, 700));
    p.allocate(d);
    expect(d.dpRank).toBe(2); // 15-1 = 14 free on rank 2 vs 13 on rank 1
    expect(p.numFreeBlocks()).toEqual([12, 13, 13]);
    p.check();
  });

  it('keeps the rank chosen even when the allocation fails', () => {
    const p = pool(8, { dpSize: 2 });
    const s = new Sequence(prompt(10));
    expect(p.allocate(s)).toBe(false);
    expect(s.dpRank).toBe(0);
    expect(s.singleBlockId).toBe(-1);
    expect(s.numBlocks).toBe(0);
    expect(p.liveSequences().size).toBe(0);
    p.check();
  });

  it('rolls a failed prefill back to empty; the match moves and the evictions stay', () => {
    const p = pool(8); // 7 usable
    const a = new Sequence(prompt(2, 100, 1));
    p.allocate(a);
    finish(p, a); // blocks 1, 2 cached; 3 free
    const c = new Sequence(prompt(2, 900, 1));
    p.allocate(c);
    finish(p, c); // blocks 4, 5 cached (c's chain is the newest)
    expect([...p.managers[0]!.lruOrder()]).toEqual([2, 1, 4, 3]); // c got 3, 4 (and 5, now free)
    const b = new Sequence(prompt(2, 100, 24)); // matches a's 2 blocks, then needs 6 more
    expect(p.allocate(b)).toBe(false);
    expect(b.numBlocks).toBe(0);
    expect(b.sharedBlocks).toBe(0);
    expect(b.singleBlockId).toBe(-1);
    // Needing 6 with 3 free: c's two blocks were evicted (a's were held by the match), and still short.
    expect(p.stats()[0]!.blocksEvicted).toBe(2);
    expect([...p.managers[0]!.lruOrder()]).toEqual([2, 1]);
    expect(p.numUsedBlocks()).toEqual([0]);
    p.check();
  });

  it('a failed growth of a sequence that holds blocks keeps them and gives back a new single id', () => {
    const p = pool(6);
    const a = new Sequence(prompt(2));
    p.allocate(a);
    const f = a.fork();
    expect(f.singleBlockId).toBe(-1);
    for (let i = 0; i < 16; i++) f.appendToken(i);
    expect(p.allocate(f, f.numTokens)).toBe(false);
    expect(f.numBlocks).toBe(2);
    expect(f.singleBlockId).toBe(-1);
    p.check();
  });

  it('allocate(list) stops at the first failure', () => {
    const p = pool(6);
    const s1 = new Sequence(prompt(2));
    const s2 = new Sequence(prompt(4, 200));
    const s3 = new Sequence(prompt(1, 300));
    expect(p.allocate([s1, s2, s3])).toBe(false);
    expect(s1.numBlocks).toBe(2);
    expect(s2.numBlocks).toBe(0);
    expect(s3.dpRank).toBe(-1);
    p.check();
  });

  it('a live sequence with no blocks takes its cached prefix at its next allocate, even allocate(s, 0)', () => {
    const p = pool();
    const a = new Sequence(prompt(2));
    p.allocate(a);
    const first = a.blockTable[0];
    finish(p, a);
    const b = new Sequence([]);
    expect(p.allocate(b)).toBe(true);
    expect(b.numBlocks).toBe(0);
    for (const t of prompt(2)) b.appendToken(t);
    // Holding no block, it cannot "fit as is" even at 0 tokens: its first allocation matches the cache.
    expect(p.allocate(b, 0)).toBe(true);
    expect([...b.blockTable]).toEqual([first]);
    expect(b.kvCachedTokens).toBe(B);
    p.check();
  });
});

describe('BlockManagerPool tryAllocate, allocateShared, cache', () => {
  it('tryAllocate continues the match allocateShared began, chained on its last shared block', () => {
    const p = pool();
    const a = new Sequence(prompt(3));
    p.allocate(a);
    const cached = [...a.blockTable];
    finish(p, a);
    const b = new Sequence([...prompt(1), 101]);
    expect(p.allocateShared(b)).toBe(1);
    // The prompt grows to a's three blocks and one token: blocks 1 and 2 match under block 0's key.
    for (const t of [101, 101, 101, 102, 102, 102, 102, 103]) b.appendToken(t);
    expect(p.tryAllocate(b)).toBe(true);
    expect([...b.blockTable].slice(0, 3)).toEqual(cached);
    expect(b.sharedBlocks).toBe(3);
    p.check();
  });

  it('tryAllocate admits the whole prompt as computed, without the exact-prompt rule', () => {
    const p = pool();
    const a = new Sequence(prompt(2));
    p.allocate(a);
    finish(p, a);
    const b = new Sequence(prompt(2));
    expect(p.tryAllocate(b)).toBe(true);
    expect(b.sharedBlocks).toBe(2);
    expect(b.numBlocks).toBe(2);
    expect(b.kvCachedTokens).toBe(8);
    p.check();
  });

  it('tryAllocate rolls back on failure', () => {
    const p = pool(5);
    const a = new Sequence(prompt(2));
    p.allocate(a);
    finish(p, a);
    const b = new Sequence(prompt(2, 100, 12)); // 2 shared + 3 new; 2 free + 0 evictable
    expect(p.tryAllocate(b)).toBe(false);
    expect(b.numBlocks).toBe(0);
    expect(b.singleBlockId).toBe(-1);
    expect(p.numUsedBlocks()).toEqual([0]);
    p.check();
  });

  it('allocateShared attaches matches to an empty sequence only', () => {
    const p = pool();
    const a = new Sequence(prompt(2, 100, 1));
    p.allocate(a);
    finish(p, a);
    const b = new Sequence(prompt(2, 100, 3));
    expect(p.allocateShared(b)).toBe(2);
    expect(p.allocateShared(b)).toBe(2);
    expect(b.singleBlockId).toBe(-1);
    expect(p.allocate(b)).toBe(true);
    expect(b.numBlocks).toBe(3);
    p.check();
  });

  it('cache(seq, n) publishes blocks while the sequence runs; deallocate refreshes them', () => {
    const p = pool();
    const a = new Sequence(prompt(2, 100, 1));
    p.allocate(a);
    p.cache(a, 8);
    expect(p.numBlocksInPrefixCache()).toEqual([2]);
    const b = new Sequence(prompt(2, 100, 2));
    p.allocate(b);
    expect(b.sharedBlocks).toBe(2);
    finish(p, a);
    expect(p.numBlocksInPrefixCache()).toEqual([2]);
    p.check();
  });

  it('deallocateWithoutCache caches nothing', () => {
    const p = pool();
    const a = new Sequence(prompt(2));
    p.allocate(a);
    a.kvCachedTokens = 8;
    p.deallocateWithoutCache(a);
    expect(p.numBlocksInPrefixCache()).toEqual([0]);
    expect(p.numFreeBlocks()).toEqual([15]);
    expect(a.numBlocks).toBe(0);
    expect(a.singleBlockId).toBe(-1);
    p.check();
  });

  it('deallocate caches only computed full blocks and releases ids in ascending order', () => {
    const p = pool();
    const a = new Sequence(prompt(3, 100, 1));
    p.allocate(a);
    a.kvCachedTokens = 9; // blocks 0 and 1 full and computed
    p.deallocate(a);
    expect(p.numBlocksInPrefixCache()).toEqual([2]);
    expect([...p.managers[0]!.freeIds().slice(-2)]).toEqual([3, 4]); // 3 then 4 pushed: 4 is next
    p.check();
  });

  it('with the prefix cache off nothing is matched or cached', () => {
    const p = pool(16, { enablePrefixCache: false });
    const a = new Sequence(prompt(2, 100, 1));
    p.allocate(a);
    finish(p, a);
    const b = new Sequence(prompt(2, 100, 1));
    p.allocate(b);
    expect(b.sharedBlocks).toBe(0);
    expect(p.numBlocksInPrefixCache()).toEqual([0]);
    p.check();
  });
});

describe('beam search forks', () => {
  it('fork shares every block with one more reference', () => {
    const p = pool();
    const a = new Sequence(prompt(2, 100, 1));
    p.allocate(a);
    const f = a.fork();
    expect([...f.blockTable]).toEqual([...a.blockTable]);
    expect(f.dpRank).toBe(a.dpRank);
    expect(p.managers[0]!.refCount(a.blockTable[0]!)).toBe(2);
    p.check();
    p.deallocate(a);
    expect(p.numFreeBlocks()).toEqual([12]);
    p.deallocate(f);
    expect(p.numFreeBlocks()).toEqual([15]);
    p.check();
  });

  it('a second child swaps the shared last block: a copy is planned and the table updated', () => {
    const p = pool();
    const a = new Sequence(prompt(1, 100, 2));
    p.allocate(a);
    const c = a.fork({ swapLastBlock: true });
    expect(c.needsSwap).toBe(true);
    c.appendToken(42);
    expect(p.allocate(c, c.numTokens)).toBe(true);
    expect(c.needsSwap).toBe(false);
    expect(c.blockTable[0]).toBe(a.blockTable[0]);
    expect(c.blockTable[1]).not.toBe(a.blockTable[1]);
    expect(p.swapTransferInfos(0)).toEqual([{ src: a.blockTable[1], dst: c.blockTable[1] }]);
    p.resetTransferInfos();
    expect(p.swapTransferInfos(0)).toEqual([]);
    p.check();
  });

  it('no swap when the step needs a new block anyway', () => {
    const p = pool();
    const a = new Sequence(prompt(2));
    p.allocate(a);
    const c = a.fork({ swapLastBlock: true });
    c.appendToken(1);
    expect(p.allocate(c, c.numTokens)).toBe(true);
    expect(c.numBlocks).toBe(3);
    expect(p.swapTransferInfos(0)).toEqual([]);
    p.check();
  });
});

describe('bad input leaves the pool unchanged', () => {
  it('rejects bad options', () => {
    expect(() => pool(1)).toThrow(/options.numBlocks must be >= 2, got 1/);
    expect(() => pool(8, { blockSize: -1 })).toThrow(/options.blockSize must be >= 1, got -1/);
    expect(() => pool(8, { dpSize: 0 })).toThrow(/options.dpSize must be in \[1, 4096\], got 0/);
    expect(() => pool(8, { singleBlockCapacity: 1 })).toThrow(/singleBlockCapacity must be >= 2/);
    expect(() => pool(8, { bogus: 1 } as never)).toThrow(/unknown option "bogus"/);
  });

  it('rejects a sequence from another pool, a non-sequence, and bad counts', () => {
    const p = pool();
    const q = pool();
    const s = new Sequence(prompt(1));
    p.allocate(s);
    const snapshot = () => ({ free: q.numFreeBlocks(), used: q.numUsedBlocks(), table: [...s.blockTable] });
    const before = snapshot();
    expect(() => q.allocate(s)).toThrow(/belongs to another pool/);
    expect(() => q.deallocate(s)).toThrow(/belongs to another pool/);
    expect(() => q.deallocate([new Sequence(), s])).toThrow(/sequences\[1\] belongs to another pool/);
    expect(() => q.allocate({} as Sequence)).toThrow(/sequence must be a Sequence/);
    expect(() => p.allocate(s, -1)).toThrow(/numTokens must be >= 0, got -1/);
    expect(() => p.allocate(s, 1.5)).toThrow(/numTokens must be an integer/);
    expect(() => p.swapTransferInfos(1)).toThrow(/dpRank must be in \[0, 0\], got 1/);
    expect(snapshot()).toEqual(before);
    p.check();
    q.check();
    p.dispose();
    expect(() => q.allocate(s)).toThrow(new Error('sequence belongs to another pool (disposed since: make a new Sequence of the same tokens); a sequence is used with one pool only'));
  });

  it('check() notices a sequence whose table was tampered with', () => {
    const p = pool();
    const s = new Sequence(prompt(1));
    p.allocate(s);
    s.state.table[0] = 5;
    expect(() => p.check()).toThrow(/holders but live sequences hold it/);
  });

  it('check() notices a live sequence placed outside the pool, and a single id held twice', () => {
    const p = pool(16, { dpSize: 2 });
    const a = new Sequence(prompt(1));
    const b = new Sequence(prompt(1, 200));
    p.allocate(a);
    p.allocate(b);
    p.check();
    // Each way of being misplaced alone: a rank past the pool's, no rank, another pool's sequence.
    a.state.dpRank = 2;
    expect(() => p.check()).toThrow(/kvpool: a live sequence is not placed in this pool/);
    a.state.dpRank = -1;
    expect(() => p.check()).toThrow(/kvpool: a live sequence is not placed in this pool/);
    a.state.dpRank = 0;
    a.state.owner = pool() as never;
    expect(() => p.check()).toThrow(/kvpool: a live sequence is not placed in this pool/);
    a.state.owner = p as never;
    p.check();
    const q = pool();
    const c = new Sequence(prompt(1));
    const d = new Sequence(prompt(1, 200));
    q.allocate(c);
    q.allocate(d);
    d.state.single = c.state.single;
    expect(() => q.check()).toThrow(/rank 0 single-id block \d+ has 1 holders but live sequences hold it 2 times/);
  });

  it('names what is wrong with every other refused call, and changes nothing', () => {
    const p = pool();
    const a = new Sequence(prompt(2));
    const b = new Sequence(prompt(1, 200));
    p.allocate(a);
    const before = { free: p.numFreeBlocks(), table: [...a.blockTable], live: p.liveSequences().size, time: p.time };
    expect(() => (p.allocate as (x: unknown, n: unknown) => boolean)([a], 3)).toThrow(/numTokens cannot be given with a list of sequences/);
    expect(() => p.allocate([a, {} as never])).toThrow(/sequences\[1\] must be a Sequence/);
    expect(() => p.adoptBeam(b, a, null as never)).toThrow(/options must be an object, got null/);
    expect(() => p.adoptBeam(b, a, 5 as never)).toThrow(/options must be an object, got 5/);
    expect(() => p.adoptBeam(b, a, { swapLastBlock: 1 as never })).toThrow(/options.swapLastBlock must be a boolean/);
    expect(() => p.adoptBeam({} as never, a)).toThrow(/child must be a Sequence/);
    expect(() => p.adoptBeam(b, {} as never)).toThrow(/source must be a Sequence/);
    expect(() => p.kvManager(1)).toThrow(/dpRank must be in \[0, 0\], got 1/);
    expect(() => p.deallocateBlocks(1, [])).toThrow(/dpRank must be in \[0, 0\], got 1/);
    expect(() => p.cache(a, 1.5)).toThrow(/numTokens must be an integer/);
    expect(() => p.adoptBeam(a, a)).toThrow(/adoptBeam: child and source are the same sequence/);
    expect(() => p.adoptBeam(a, b)).toThrow(/adoptBeam: the source has not been allocated yet/);
    expect(() => a.fork(null as never)).toThrow(/options must be an object, got null/);
    expect(() => p.setTime('5' as never)).toThrow(/t must be a number, got/);
    expect(() => p.setTime(Infinity)).toThrow(/t must be a finite time >= the current time 0, got Infinity/);
    expect(() => p.linearStateStats()).toThrow(/linearStateStats: this pool was created without enableLinearState/);
    expect(() => p.linearStateCacheOp(a, 4)).toThrow(/linearStateCacheOp: this pool was created without enableLinearState/);
    expect(() => p.releaseLinearStateSlot(a)).toThrow(/releaseLinearStateSlot: this pool was created without enableLinearState/);
    expect(() => p.deallocateBlocks(0, [a.blockTable[0]!])).toThrow(/blockIds\[0\] = \d+ is not a block allocateBlocks handed out on dp rank 0/);
    // Ids outside the rank are refused the same way (no holder count is read past the table).
    expect(() => p.deallocateBlocks(0, [-1])).toThrow(/^blockIds\[0\] = -1 is not a block allocateBlocks handed out on dp rank 0/);
    expect(() => p.deallocateBlocks(0, [p.numBlocks])).toThrow(new RegExp(`^blockIds\\[0\\] = ${p.numBlocks} is not a block allocateBlocks handed out`));
    expect(() => p.deallocateBlocks(0, [0.5])).toThrow(/^blockIds\[0\] must be an int32 integer, got 0.5/);
    expect(() => p.recordEvents('yes' as never)).toThrow(/^on must be a boolean, got "yes"/);
    expect(() => p.linearStateCache(0)).toThrow(/^linearStateCache: this pool was created without enableLinearState/);
    expect(() => p.compositeManager(1)).toThrow(/^dpRank must be in \[0, 0\], got 1/);
    expect({ free: p.numFreeBlocks(), table: [...a.blockTable], live: p.liveSequences().size, time: p.time }).toEqual(before);
    expect(b.dpRank).toBe(-1);
    p.cache(b); // an unplaced sequence has nothing to cache
    expect(b.dpRank).toBe(-1);
    const other = pool();
    const c = new Sequence(prompt(1));
    other.allocate(c);
    expect(() => p.forkSequence(c, new Sequence())).toThrow(/parent belongs to another pool/);
    p.check();
  });

  it('names the options object and the option it does not know', () => {
    expect(() => new BlockManagerPool(null as never)).toThrow(/^options must be an object, got null/);
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, hostNumBlocks: 4 } as never)).toThrow(/^options: unknown option "hostNumBlocks"/);
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, seed: 1.5 })).toThrow(/^options.seed must be a safe integer or a bigint, got 1.5/);
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, enablePrefixCache: 1 as never })).toThrow(/^options.enablePrefixCache must be a boolean, got 1/);
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, enableLinearState: 1 as never })).toThrow(/^options.enableLinearState must be a boolean, got 1/);
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, enableDisaggPd: 1 as never })).toThrow(/^options.enableDisaggPd must be a boolean, got 1/);
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, evictionPolicy: 'fifo' as never })).toThrow(/^options.evictionPolicy must be one of 'lru'/);
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, managerTypes: ['full'], enablePrefixCache: true })).toThrow(
      /^options.enablePrefixCache cannot be true on composite ranks: a composite rank does no prefix caching \(as in the reference\)/,
    );
    expect(() => new BlockManagerPool({ numBlocks: 8, blockSize: B, enableXtensor: true, numLayers: 1, slotSize: 2, enablePrefixCache: true } as never)).toThrow(
      /^options.enablePrefixCache cannot be true on xtensor ranks: XTensor blocks have no prefix cache/,
    );
  });

  it('XTensor ranks take 2 MiB pages unless told otherwise', () => {
    const p = new BlockManagerPool({ numBlocks: 8, blockSize: B, enableXtensor: true, numLayers: 1, slotSize: 2 } as never);
    expect((p.managers[0] as unknown as { pageSize: number }).pageSize).toBe(2 * 1024 * 1024);
    p.dispose();
  });

  it('a pool without composite ranks has no composite manager and no sub-manager figures', () => {
    const p = pool();
    expect(p.compositeManager(0)).toBeNull();
    expect(p.subManagerStats(0)).toEqual([]);
  });
});

describe('BlockManagerPool.create', () => {
  it('loads the core and gives a working pool, with plain and with concurrent ranks', async () => {
    for (const more of [{}, { enableKvcacheStore: true }]) {
      const p = await BlockManagerPool.create({ numBlocks: 16, blockSize: B, ...more });
      const s = new Sequence(prompt(2));
      expect(p.allocate(s)).toBe(true);
      expect(p.numUsedBlocks()).toEqual([2]);
      p.check();
      const kv = p.managers;
      p.dispose();
      // Every manager the pool made goes back to the core: its ranks' and its single-id managers.
      expect([...kv, ...p.singles].map((m) => (m as unknown as { isDisposed: boolean }).isDisposed)).toEqual([true, true]);
      p.dispose(); // a second dispose is harmless
    }
    await expect(BlockManagerPool.create({ numBlocks: 1, blockSize: B })).rejects.toThrow(/options.numBlocks must be >= 2, got 1/);
  });
});

describe('rank kinds and add-ons combine', () => {
  const composite = { managerTypes: [1, 0] as const, compressRatios: [1, 1], slidingWindowSize: 8 };
  const xtensor = { enableXtensor: true, numLayers: 1, slotSize: 2, pageSize: 12 };
  const cases: Array<[string, object]> = [
    ['composite + linear state', { ...composite, enableLinearState: true, linearStateNumSlots: 8 }],
    ['linear state + XTensor', { enableLinearState: true, linearStateNumSlots: 8, ...xtensor }],
    ['composite + concurrent', { ...composite, enableKvcacheStore: true }],
    ['XTensor + concurrent', { ...xtensor, enableDisaggPd: true }],
    ['XTensor + linear state + concurrent', { ...xtensor, enableLinearState: true, linearStateNumSlots: 8, enableKvcacheStore: true }],
  ];
  for (const [name, extra] of cases) {
    it(name, () => {
      const p = new BlockManagerPool({ numBlocks: 16, blockSize: 4, ...extra } as never);
      const used = p.numUsedBlocks();
      const s = new Sequence([1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(p.allocate(s)).toBe(true);
      expect(p.numUsedBlocks()[0]).toBeGreaterThan(used[0]!);
      p.check();
      p.deallocate(s);
      expect(p.numUsedBlocks()).toEqual(used);
      // The clock drives retention, which only a prefix cache has: these ranks take the time and keep none.
      p.setTime(5);
      expect(p.time).toBe(0);
      p.check();
      p.dispose();
    });
  }
  it('XTensor + concurrent: each rank is a ConcurrentXTensorBlockManagerImpl that the pool holds locked for each operation', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 4, dpSize: 2, ...xtensor, enableDisaggPd: true, lockTimeoutMs: 300 } as never);
    const ms = p.managers as ConcurrentXTensorBlockManagerImpl[];
    expect(ms.map((m) => [m instanceof ConcurrentXTensorBlockManagerImpl, m.lockTimeoutMs, m.dpRank])).toEqual([[true, 300, 0], [true, 300, 1]]);
    expect(ms.map((m) => m.lockDepth())).toEqual([0, 0]);
    p.dispose();
    expect(ms.every((m) => m.isDisposed)).toBe(true);
  });
});
