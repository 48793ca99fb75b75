// What the rank seam adds or fixes: the reference's raw allocate and beam
// adoption, releasing a live linear-state slot alone, XTensor's
// blocks-per-page figure, options that would do nothing, and pool
// operations that are all or nothing (the host tier's tryAllocate, a lock
// timeout in the middle of an allocation, a linear-state batch settled by
// hand).

import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { XTensorBlockManagerImpl } from '../bindings/managers/xtensor-block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { LockTimeoutError } from '../bindings/managers/shared-lock.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { blockTokens } from './support/block-tokens.js';

const B = 4;
const prompt = (blocks: number, base = 100, extra = 0): number[] => blockTokens(B, blocks, base, extra);

describe('the raw allocate of the reference', () => {
  it('takes blocks for n tokens from the rank with the most free blocks, and gives them back', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, dpSize: 2 });
    const s = new Sequence(prompt(3));
    expect(p.allocate(s)).toBe(true);
    expect(s.dpRank).toBe(0);
    const got = p.allocateBlocks(9)!; // 3 blocks, from rank 1 (15 free against rank 0's 12)
    expect(got.dpRank).toBe(1);
    expect([...got.blockIds]).toEqual([1, 2, 3]);
    expect(p.numUsedBlocks()).toEqual([3, 3]);
    p.check(); // the caller's blocks are holders the audit knows of
    expect(p.allocateBlocks(1000)).toBeNull();
    // Only blocks allocateBlocks handed out on that rank come back this way: not a sequence's.
    expect(() => p.deallocateBlocks(0, [s.blockAt(0)])).toThrow(/blockIds\[0\] = 1 is not a block allocateBlocks handed out on dp rank 0/);
    expect(() => p.deallocateBlocks(1, [1, 1])).toThrow(/blockIds\[1\] = 1 is not a block allocateBlocks handed out/);
    p.deallocateBlocks(got.dpRank, got.blockIds);
    expect(p.numUsedBlocks()).toEqual([3, 0]);
    expect(() => p.deallocateBlocks(1, got.blockIds)).toThrow(/blockIds\[0\] = 1 is not a block allocateBlocks handed out/);
    expect(p.kvManager(1).numFreeBlocks()).toBe(15);
    expect(() => p.allocateBlocks(-1)).toThrow(/numTokens must be >= 0/);
    p.deallocate(s);
    p.check();
  });
});

describe('beam search as the reference does it', () => {
  it('a surviving child takes its source beam\'s blocks at its next allocation, copying the shared last block when asked', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    const src = new Sequence(prompt(2, 100, 2)); // 10 tokens: 3 blocks
    const child = new Sequence(prompt(2, 500, 1)); // 9 tokens: 3 blocks of its own
    expect(p.allocate(src)).toBe(true);
    expect(p.allocate(child)).toBe(true);
    expect([...src.blockTable]).toEqual([1, 2, 3]);
    expect([...child.blockTable]).toEqual([4, 5, 6]);
    p.adoptBeam(child, src, { swapLastBlock: true });
    // Nothing moves until the child's next allocation; the source's blocks are shared already.
    expect([...child.blockTable]).toEqual([4, 5, 6]);
    expect([...child.tokens]).toEqual([...src.tokens]);
    p.check();
    expect(p.allocate(child)).toBe(true);
    // Its own blocks went back (6, 5, 4 on the free stack, in that order of release: 4, 5, 6),
    // the last shared block was copied into a fresh one (the last released: 6).
    expect([...child.blockTable]).toEqual([1, 2, 6]);
    expect(p.swapTransferInfos(0)).toEqual([{ src: 3, dst: 6 }]);
    expect(child.needsSwap).toBe(false);
    p.check();
    p.deallocate([child, src]);
    expect(p.numUsedBlocks()).toEqual([0]);
    p.check();
  });

  it("keeps the child's computed count when its next allocation takes the source's blocks", () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    const src = new Sequence(prompt(2, 100, 2));
    const child = new Sequence(prompt(2, 500, 1));
    expect(p.allocate([src, child])).toBe(true);
    src.kvCachedTokens = 10;
    p.adoptBeam(child, src);
    expect(child.kvCachedTokens).toBe(10);
    child.appendToken(5);
    expect(p.allocate(child)).toBe(true);
    expect([...child.blockTable]).toEqual([1, 2, 3]);
    expect(child.kvCachedTokens).toBe(10);
    // Finishing caches what it computed: the source's two full blocks are the child's now.
    p.deallocate(src);
    p.deallocate(child);
    expect(p.numBlocksInPrefixCache()).toEqual([2]);
    p.check();
  });

  it("takes the source's cache salt with its tokens, as a fork does", () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    const src = new Sequence(prompt(2, 100, 2), { cacheSalt: 'tenant-a' });
    const child = new Sequence(prompt(1, 500));
    expect(p.allocate([src, child])).toBe(true);
    p.adoptBeam(child, src);
    expect(child.cacheSalt).toBe('tenant-a');
    expect(child.prefixHashes()).toEqual(src.prefixHashes());
    src.kvCachedTokens = 10;
    child.kvCachedTokens = 10;
    p.deallocate(child);
    // Its blocks were cached under the tenant's chain: the tenant hits them, nobody else does.
    const again = new Sequence(prompt(2, 100, 2), { cacheSalt: 'tenant-a' });
    const other = new Sequence(prompt(2, 100, 2));
    expect(p.allocateShared(again)).toBe(2);
    expect(p.allocateShared(other)).toBe(0);
    p.deallocate([src, again, other]);
    p.check();
  });

  it("on a host tier, the child's own host blocks go with its own device blocks: nothing of its old prompt is loaded", () => {
    const p = new HierarchyBlockManagerPool({ numBlocks: 16, blockSize: B, hostNumBlocks: 16 });
    const long = prompt(3, 100, 1);
    const first = new Sequence(long);
    expect(p.allocate(first)).toBe(true);
    first.kvCachedTokens = first.numTokens;
    p.deallocate(first);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    expect(p.managers[0]!.evict(100)).toBe(3);
    // The child attaches its prompt's 3 host blocks and copies none of them yet.
    const child = new Sequence(long);
    expect(p.allocateChunked(child, 4, 0)).toBe(true);
    expect([p.hostBlockTable(child).length, child.kvCachedTokens]).toEqual([3, 0]);
    const src = new Sequence(prompt(1, 500, 1));
    expect(p.allocate(src)).toBe(true);
    p.adoptBeam(child, src);
    expect(p.allocate(child)).toBe(true);
    expect([...child.blockTable]).toEqual([...src.blockTable]);
    expect([p.hostBlockTable(child).length, p.hostKvCachedTokens(child), child.kvCachedTokens]).toEqual([0, 0, 0]);
    expect(p.takeTransfers()[0]!.loads).toEqual([]);
    p.check();
    p.deallocate([child, src]);
    expect([p.numUsedBlocks(), p.hostNumUsedBlocks()]).toEqual([[0], [0]]);
    p.check();
  });

  it('a sequence whose adopted beam is not taken yet is neither forked nor adopted from (its table is not its tokens\' yet)', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    const src = new Sequence(prompt(2, 100, 2));
    const child = new Sequence(prompt(1, 500, 1));
    const other = new Sequence(prompt(1, 700));
    expect(p.allocate([src, child, other])).toBe(true);
    p.adoptBeam(child, src);
    const before = { table: [...child.blockTable], used: p.numUsedBlocks() };
    expect(() => child.fork()).toThrow(/fork: the sequence adopted a beam its next allocation takes; allocate it first/);
    expect(() => p.adoptBeam(other, child)).toThrow(/adoptBeam: the source adopted a beam its next allocation takes; allocate it first/);
    expect({ table: [...child.blockTable], used: p.numUsedBlocks() }).toEqual(before);
    expect([...other.tokens]).toEqual(prompt(1, 700));
    p.check();
    expect(p.allocate(child)).toBe(true);
    const fork = child.fork();
    expect([...fork.blockTable]).toEqual([...src.blockTable]);
    p.deallocate([fork, child, src, other]);
    p.check();
  });

  it('is refused across ranks, on an unplaced source and on composite ranks', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, dpSize: 2 });
    const a = new Sequence(prompt(1));
    const b = new Sequence(prompt(1, 200));
    expect(() => p.adoptBeam(a, b)).toThrow(/the source has not been allocated yet/);
    expect(p.allocate([a, b])).toBe(true);
    expect([a.dpRank, b.dpRank]).toEqual([0, 1]);
    expect(() => p.adoptBeam(a, b)).toThrow(/the child is on dp rank 0, its source on 1/);
    expect(() => p.adoptBeam(a, a)).toThrow(/the same sequence/);
    expect(() => p.adoptBeam(a, b, { swap: true } as never)).toThrow(new TypeError('options: unknown option "swap" (known: swapLastBlock)'));
    p.check();
    const c = new BlockManagerPool({ numBlocks: 16, blockSize: B, managerTypes: ['full'] });
    const x = new Sequence(prompt(1));
    const y = new Sequence(prompt(1));
    expect(c.allocate([x, y])).toBe(true);
    expect(() => c.adoptBeam(y, x)).toThrow(/composite ranks keep no beam state/);
    c.check();
  });
});

describe('linear state', () => {
  it('releaseLinearStateSlot gives back the live slot alone; the next allocation takes a new one', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, enableLinearState: true, linearStateNumSlots: 4 });
    const s = new Sequence(prompt(2));
    expect(p.allocate(s)).toBe(true);
    const slot = s.linearStateSlotId;
    expect(slot).toBeGreaterThan(0);
    expect(() => p.linearStateCache(0).releaseLiveSlot(slot)).toThrow(/is the live slot of a pool's sequence; the pool gives it back/);
    p.releaseLinearStateSlot(s);
    expect(s.linearStateSlotId).toBe(-1);
    expect(s.singleBlockId).toBeGreaterThan(0);
    // No state to run a forward on: no cache op, and the sequence stays uninitialized.
    expect(() => p.linearStateCacheOp(s, s.numTokens)).toThrow(
      new Error('linearStateCacheOp: the sequence holds no live linear-state slot (releaseLinearStateSlot gave it back); allocate it again first'),
    );
    expect(s.linearStateInitialized).toBe(false);
    p.check();
    s.appendToken(7);
    expect(p.allocate(s)).toBe(true);
    expect(s.linearStateSlotId).toBe(slot);
    p.check();
  });

  it('a sequence whose live slot was released alone gives back the new slot when its blocks run out', () => {
    const p = new BlockManagerPool({ numBlocks: 4, blockSize: B, enableLinearState: true, linearStateNumSlots: 4 });
    const a = new Sequence(prompt(2));
    expect(p.allocate(a)).toBe(true);
    p.releaseLinearStateSlot(a);
    const b = new Sequence(prompt(1, 300));
    expect(p.allocate(b)).toBe(true);
    expect(p.numFreeBlocks()).toEqual([0]);
    a.appendToken(7);
    const before = { table: [...a.blockTable], single: a.singleBlockId, slots: p.linearStateStats()[0]!.freeSlots };
    expect(p.allocate(a)).toBe(false);
    expect({ table: [...a.blockTable], single: a.singleBlockId, slots: p.linearStateStats()[0]!.freeSlots }).toEqual(before);
    expect(a.linearStateSlotId).toBe(-1);
    p.check();
  });

  it('a sequence whose live slot was released alone fails its next allocation when no slot is free, keeping what it holds', () => {
    // Two slots: one live slot to give (slot 0 is never handed out).
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B, enableLinearState: true, linearStateNumSlots: 2 });
    const a = new Sequence(prompt(2));
    expect(p.allocate(a)).toBe(true);
    p.releaseLinearStateSlot(a);
    const b = new Sequence(prompt(1, 300));
    expect(p.allocate(b)).toBe(true);
    a.appendToken(7);
    const before = { table: [...a.blockTable], single: a.singleBlockId, free: p.numFreeBlocks() };
    expect(p.allocate(a)).toBe(false);
    expect({ table: [...a.blockTable], single: a.singleBlockId, free: p.numFreeBlocks() }).toEqual(before);
    expect(a.linearStateSlotId).toBe(-1);
    expect(p.liveSequences().has(a)).toBe(true);
    p.check();
    p.deallocate(b);
    expect(p.allocate(a)).toBe(true);
    expect(a.linearStateSlotId).toBeGreaterThan(0);
    p.check();
  });

  it('a batch whose reservation was committed by hand is refused whole, stays open, and abortCacheOps settles it', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, enableLinearState: true, linearStateNumSlots: 6 });
    const s = new Sequence(prompt(2));
    expect(p.allocate(s)).toBe(true);
    const c = p.linearStateCache(0);
    const op = p.linearStateCacheOp(s, 8);
    const res = c.resolveCacheOps([op], [s]);
    expect(res.reservations.length).toBe(1);
    c.commit(res.reservations[0]!);
    expect(() => c.commitReservations(res)).toThrow(/already committed or aborted by itself; settle the batch with abortCacheOps/);
    c.abortCacheOps(res);
    expect(c.openReservations()).toEqual([]);
    expect(c.openPins()).toEqual([]);
    p.check();
  });
});

describe('checkpoint keys of salted sequences', () => {
  it('are the salted chain hashes, whether stamped on blocks or hashed from the tokens', () => {
    for (const extra of [{}, { managerTypes: ['full'] as const }]) {
      const p = new BlockManagerPool({ numBlocks: 32, blockSize: B, enableLinearState: true, ...extra });
      const t = prompt(3);
      const salted = new Sequence(t, { cacheSalt: 'tenant-a' });
      const plain = new Sequence(t);
      expect(p.allocate([salted, plain])).toBe(true);
      const before = salted.prefixHashes();
      expect(before).not.toEqual(plain.prefixHashes());
      // Once its blocks are cached (their salted hashes stamped), the keys are the same.
      salted.kvCachedTokens = 12;
      p.cache(salted);
      expect(salted.prefixHashes()).toEqual(before);
      // And they are the chain of the salt's digest and the tokens: equal to another sequence of the same tenant.
      const again = new Sequence(t, { cacheSalt: 'tenant-a' });
      expect(p.allocate(again)).toBe(true);
      expect(again.prefixHashes()).toEqual(before);
      p.check();
      p.dispose();
    }
  });
});

describe('XTensor blocks per page', () => {
  it('reports the reference\'s figure, floor(pageSize / blockBytes), beside the exact count of each page', () => {
    const m = new XTensorBlockManagerImpl({ numBlocks: 10, blockSize: 4, pageSize: 10, blockBytes: 4, numLayers: 1 });
    expect(m.blocksPerPage).toBe(2);
    expect(m.pageBlocks(1)).toEqual([3, 5]); // [10, 20) holds blocks 3 and 4 wholly: ids 2 and 5 straddle
    m.dispose();
  });
});

describe('options that would do nothing are errors', () => {
  const base = { numBlocks: 16, blockSize: B };
  const cases: Array<[object, RegExp]> = [
    [{ slidingWindowSize: 8 }, /options.slidingWindowSize shapes composite ranks; it does nothing without options.managerTypes/],
    [{ managerTypes: ['full'], slidingWindowSize: 8 }, /options.slidingWindowSize does nothing without a sliding-window sub-manager/],
    [{ linearStateNumSlots: 8 }, /options.linearStateNumSlots does nothing without options.enableLinearState/],
    [{ linearStateReuse: 'contiguous' }, /options.linearStateReuse does nothing without options.enableLinearState/],
    [{ numLayers: 2 }, /options.numLayers shapes XTensor pages; it does nothing without options.enableXtensor/],
    [{ lockTimeoutMs: 100 }, /options.lockTimeoutMs does nothing without enableDisaggPd or enableKvcacheStore/],
    [{ enablePrefixCache: false, evictionPolicy: 'lfu' }, /options.evictionPolicy 'lfu' orders prefix-cache entries; this pool keeps no prefix cache/],
    [{ managerTypes: ['full'], evictionPolicy: 'priority' }, /this pool keeps no prefix cache/],
  ];
  for (const [extra, msg] of cases) {
    it(JSON.stringify(extra), () => {
      expect(() => new BlockManagerPool({ ...base, ...extra } as never)).toThrow(msg);
    });
  }
  it('a host tier with no prefix cache to keep', () => {
    expect(() => new HierarchyBlockManagerPool({ ...base, hostNumBlocks: 8, managerTypes: ['full'] })).toThrow(/composite ranks keep none/);
  });
});

describe('pool operations are all or nothing', () => {
  it("the host tier's tryAllocate that fails keeps the host blocks allocateShared attached, and the sequence live", () => {
    const p = new HierarchyBlockManagerPool({ numBlocks: 6, blockSize: B, hostNumBlocks: 16 });
    // Put a 3-block prompt on the host, and empty the device cache.
    const a = prompt(3, 100, 1);
    const first = new Sequence(a);
    expect(p.allocate(first)).toBe(true);
    first.kvCachedTokens = first.numTokens;
    p.deallocate(first);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    expect(p.managers[0]!.evict(100)).toBe(3);
    // A sequence attaches the host hits, then asks for more than the device has.
    const s = new Sequence([...a, ...prompt(4, 900)]);
    expect(p.allocateShared(s)).toBe(0);
    expect(p.hostBlockTable(s).length).toBe(3);
    p.check();
    const before = { host: [...p.hostBlockTable(s)], single: s.singleBlockId, blocks: s.numBlocks };
    expect(p.tryAllocate(s)).toBe(false);
    expect({ host: [...p.hostBlockTable(s)], single: s.singleBlockId, blocks: s.numBlocks }).toEqual(before);
    expect(p.liveSequences().has(s)).toBe(true);
    p.check();
    p.deallocateWithoutCache(s);
    expect(p.hostNumUsedBlocks()).toEqual([0]);
    p.check();
  });

  it("a salted sequence's first chunked allocation checks its load plan against its salted host hits", () => {
    const p = new HierarchyBlockManagerPool({ numBlocks: 16, blockSize: B, hostNumBlocks: 16 });
    const t = prompt(3, 100, 1);
    const first = new Sequence(t, { cacheSalt: 'tenant-a' });
    expect(p.allocate(first)).toBe(true);
    first.kvCachedTokens = first.numTokens;
    p.deallocate(first);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    expect(p.managers[0]!.evict(100)).toBe(3);
    // The host holds the tenant's 3 blocks; 4 tokens leave the sequence 1 device block to load into.
    const s = new Sequence(t, { cacheSalt: 'tenant-a' });
    expect(() => p.allocateChunked(s, 4, 3)).toThrow(/would write device block 2/);
    expect([s.dpRank, s.numBlocks, p.hostBlockTable(s).length]).toEqual([-1, 0, 0]);
    expect(p.allocateChunked(s, 4, 1)).toBe(true);
    expect(p.takeTransfers()[0]!.loads.map((l) => l.dst)).toEqual([...s.blockTable]);
    p.check();
  });

  it('every pool call on a concurrent rank gives its lock back, whether it succeeds or fails', () => {
    const p = new BlockManagerPool({ numBlocks: 6, blockSize: B, enableDisaggPd: true });
    const m = p.managers[0] as ConcurrentBlockManagerImpl;
    const held = () => m.lockDepth();
    const a = new Sequence(prompt(2));
    expect(p.allocate(a)).toBe(true);
    expect(held()).toBe(0);
    const big = new Sequence(prompt(8, 500));
    expect(p.allocate(big)).toBe(false);
    expect(held()).toBe(0);
    expect(p.tryAllocate(new Sequence(prompt(8, 600)))).toBe(false);
    expect(held()).toBe(0);
    a.kvCachedTokens = a.numTokens;
    p.cache(a);
    expect(held()).toBe(0);
    const shared = new Sequence(prompt(2));
    expect(p.allocateShared(shared)).toBe(1);
    expect(held()).toBe(0);
    const child = new Sequence(prompt(1, 700));
    expect(p.allocate(child)).toBe(true);
    p.adoptBeam(child, a);
    expect(held()).toBe(0);
    const f = a.fork();
    expect(held()).toBe(0);
    for (const s of [a, shared, child, f, big]) p.deallocate(s);
    expect(held()).toBe(0);
    p.check();
  });

  it('the pool passes lockTimeoutMs to its ranks, and a timeout in allocate changes nothing', async () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, enableDisaggPd: true, lockTimeoutMs: 200 });
    const m = p.managers[0] as ConcurrentBlockManagerImpl;
    expect(m.lockTimeoutMs).toBe(200);
    // Another thread takes the rank's lock and dies holding it.
    const start = new SharedArrayBuffer(8);
    const w = new Worker(new URL('./support/ts-worker.mjs', import.meta.url), {
      workerData: { entry: new URL('./support/concurrent-worker.ts', import.meta.url).href, mode: 'die-holding', desc: m.share(), ops: 0, seed: 0, tag: 0, owners: null, start },
    });
    await new Promise((res) => w.once('exit', res));
    const s = new Sequence(prompt(2));
    expect(() => p.allocate(s)).toThrow(LockTimeoutError);
    expect([s.dpRank, s.singleBlockId, s.numBlocks]).toEqual([-1, -1, 0]);
    expect(p.liveSequences().size).toBe(0);
    expect([...p.singles[0]!.freeIds()].length).toBe(201);
  });
});

describe('keys of blocks written past a fork', () => {
  // A fork without a swap shares the parent's partial last block; when both
  // write different tokens into it (a race on the block the worker makes, not
  // the pool), the first to cache it keys it. The other must not take that
  // key as its own: its later blocks are keyed on the chain of its own
  // tokens, as the reference model keys them.
  it("a sequence's later blocks are keyed by its own tokens, not by the chain of the block's first cacher", () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 2 });
    const s = new Sequence([1]);
    expect(p.allocate(s)).toBe(true);
    const c = s.fork();
    s.appendToken(2);
    c.appendToken(3);
    s.kvCachedTokens = 2;
    c.kvCachedTokens = 2;
    p.cache(s);
    p.cache(c);
    c.appendToken(4);
    c.appendToken(5);
    expect(p.allocate(c)).toBe(true);
    c.kvCachedTokens = 4;
    p.cache(c);
    // [1, 2, 4, 5, 6] shares its first block with s, and nothing after it with anyone.
    expect(p.allocateShared(new Sequence([1, 2, 4, 5, 6]))).toBe(1);
  });

  it('the same holds for a beam adopted as the reference does it', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 2 });
    const s = new Sequence([1]);
    const c = new Sequence([9]);
    expect(p.allocate(s)).toBe(true);
    expect(p.allocate(c)).toBe(true);
    p.adoptBeam(c, s);
    s.appendToken(2);
    c.appendToken(3);
    s.kvCachedTokens = 2;
    c.kvCachedTokens = 2;
    p.cache(s);
    expect(p.allocate(c)).toBe(true); // takes the beam: s's block, shared
    p.cache(c);
    c.appendToken(4);
    c.appendToken(5);
    expect(p.allocate(c)).toBe(true);
    c.kvCachedTokens = 4;
    p.cache(c);
    p.check();
    expect(p.allocateShared(new Sequence([1, 2, 4, 5, 6]))).toBe(1);
    // The shared block was keyed with s's tokens first: a prompt of c's own tokens misses at once.
    expect(p.allocateShared(new Sequence([1, 3, 4, 5, 6]))).toBe(0);
  });
});
