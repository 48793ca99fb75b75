// Scenario tests of HierarchyBlockManagerPool (docs/host-tier.md): offload plan
// contents, load plan contents, the chunked limit, completion, failed plans,
// the checked precondition, and the core's insert by stamped hash.

import { describe, expect, it } from 'vitest';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { HierarchyBlockManagerPool, type OffloadPlan } from '../bindings/pool/hierarchy-block-manager-pool.js';
import type { BlockStoredEvent } from '../bindings/managers/kv-events.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { blockTokens } from './support/block-tokens.js';

const B = 4;
const prompt = (blocks: number, base = 100, extra = 0): number[] => blockTokens(B, blocks, base, extra);
function pool(numBlocks = 8, hostNumBlocks = 16, more = {}) {
  return new HierarchyBlockManagerPool({ numBlocks, blockSize: B, hostNumBlocks, ...more });
}
function hashOf(tokens: number[], i: number): number[] {
  return [...hashBlocks(tokens, B).subarray(i * 16, i * 16 + 16)];
}
function plain(p: OffloadPlan | null) {
  return p && p.blocks.map((b) => ({ src: b.src, dst: b.dst, hash: [...b.hash] }));
}
/** Prefill, compute the prompt, finish: the offload is queued. */
function runAndFinish(p: HierarchyBlockManagerPool, tokens: number[]): Sequence {
  const s = new Sequence(tokens);
  expect(p.allocate(s)).toBe(true);
  s.kvCachedTokens = s.numTokens;
  p.deallocate(s);
  return s;
}
/** Offloads A's 3 full blocks to the host and empties the device cache. */
function hostHoldsA(p: HierarchyBlockManagerPool, a: number[]) {
  runAndFinish(p, a);
  const [t] = p.takeTransfers();
  p.completeOffload(t!.offload!);
  expect(p.managers[0]!.evict(100)).toBe(3);
  p.check();
}

/** A sequence of A's prompt that allocateShared attached to A's host blocks (no device hits). */
function attachedToHostHits(p: HierarchyBlockManagerPool) {
  const a = prompt(3, 100, 1);
  hostHoldsA(p, a);
  const s = new Sequence(a);
  expect(p.allocateShared(s)).toBe(0);
  return s;
}

describe('HierarchyBlockManagerPool offload', () => {
  it('queues the computed full blocks only the sequence and the device cache hold, with their hashes', () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    expect([...s.blockTable]).toEqual([1, 2, 3, 4]);
    s.kvCachedTokens = 13;
    p.deallocate(s);
    p.check();
    // Device blocks 1..3 are cached and held by the queued pairs (used); 4 is free.
    expect(p.numUsedBlocks()).toEqual([3]);
    expect(p.numBlocksInPrefixCache()).toEqual([3]);
    expect(p.numFreeBlocks()).toEqual([4]);
    expect(p.hostNumUsedBlocks()).toEqual([3]);
    expect(p.hierarchyStats()[0]).toMatchObject({ blocksOffloaded: 3, offloadBlocksInFlight: 3 });
    const [t] = p.takeTransfers();
    expect(t!.loads).toEqual([]);
    expect(t!.offload!.dpRank).toBe(0);
    expect(plain(t!.offload)).toEqual([
      { src: 1, dst: 1, hash: hashOf(a, 0) },
      { src: 2, dst: 2, hash: hashOf(a, 1) },
      { src: 3, dst: 3, hash: hashOf(a, 2) },
    ]);
    expect(p.offloadsInFlight()).toEqual([t!.offload]);
    // Nothing new is queued: a second take has no offload.
    expect(p.takeTransfers()[0]!.offload).toBeNull();
    p.check();
  });

  it('completes a plan: device blocks back in the device cache, host blocks cached by hash', () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    runAndFinish(p, a);
    const plan = p.takeTransfers()[0]!.offload!;
    p.completeOffload(plan);
    p.check();
    expect(p.numUsedBlocks()).toEqual([0]);
    expect(p.numBlocksInPrefixCache()).toEqual([3]);
    expect(p.hostNumUsedBlocks()).toEqual([0]);
    expect(p.hostNumBlocksInPrefixCache()).toEqual([3]);
    expect([...p.hosts[0]!.lruOrder()]).toEqual([3, 2, 1]);
    expect([...p.hosts[0]!.blockHash(2)!]).toEqual(hashOf(a, 1));
    expect(p.offloadsInFlight()).toEqual([]);
    expect(p.hierarchyStats()[0]).toMatchObject({ offloadBlocksInFlight: 0, offloadBlocksFailed: 0 });
    expect(() => p.completeOffload(plan)).toThrow(/not an offload plan in flight/);
    p.check();
  });

  it('gives a failed plan back without caching, leaking nothing', () => {
    const p = pool();
    runAndFinish(p, prompt(3, 100, 1));
    const plan = p.takeTransfers()[0]!.offload!;
    p.completeOffload(plan, false);
    p.check();
    expect(p.numUsedBlocks()).toEqual([0]);
    expect(p.numBlocksInPrefixCache()).toEqual([3]);
    expect(p.hostNumUsedBlocks()).toEqual([0]);
    expect(p.hostNumBlocksInPrefixCache()).toEqual([0]);
    expect(p.hostNumFreeBlocks()).toEqual([15]);
    expect(p.hierarchyStats()[0]).toMatchObject({ offloadBlocksFailed: 3, offloadBlocksInFlight: 0 });
  });

  it('skips blocks another sequence still holds, and blocks the host already has', () => {
    const p = pool(16);
    const a = prompt(3, 100, 1);
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = 13;
    const f = s.fork();
    p.deallocate(s);
    expect(p.takeTransfers()[0]!.offload).toBeNull();
    p.check();
    p.deallocate(f);
    // The host blocks s allocated were given back 1, 2, 3 and come out 3, 2, 1.
    const plan = p.takeTransfers()[0]!.offload!;
    expect(plain(plan)!.map((b) => [b.src, b.dst])).toEqual([[1, 3], [2, 2], [3, 1]]);
    p.completeOffload(plan);
    // A sequence whose prompt the host holds offloads nothing more.
    const t = new Sequence(a);
    expect(p.allocate(t)).toBe(true);
    t.kvCachedTokens = 13;
    p.deallocate(t);
    expect(p.takeTransfers()[0]!.offload).toBeNull();
    p.check();
  });

  it('narrows the offload when the host cannot allocate, and never fails the call', () => {
    const p = pool(8, 3); // two usable host blocks, three to offload
    runAndFinish(p, prompt(3, 100, 1));
    expect(p.takeTransfers()[0]!.offload).toBeNull();
    expect(p.numUsedBlocks()).toEqual([0]);
    expect(p.hostNumFreeBlocks()).toEqual([2]);
    p.check();
  });

  it('is refused without a prefix cache: the host tier keeps prefix-cache blocks', () => {
    expect(() => pool(8, 16, { enablePrefixCache: false })).toThrow(/a host tier keeps prefix-cache blocks, and this pool has no prefix cache \(enablePrefixCache is false\)/);
  });
});

describe('HierarchyBlockManagerPool loads', () => {
  it('plans H2D copies of the host hits the device lacks and advances the computed count', () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    hostHoldsA(p, a);
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(0);
    expect([...s.blockTable]).toEqual([1, 2, 3, 4]);
    expect([...p.hostBlockTable(s)]).toEqual([1, 2, 3]);
    expect(p.hostKvCachedTokens(s)).toBe(12);
    expect(s.kvCachedTokens).toBe(12);
    const [t] = p.takeTransfers();
    expect(t!.offload).toBeNull();
    expect(t!.loads.map((l) => ({ src: l.src, dst: l.dst, hash: [...l.hash] }))).toEqual([
      { src: 1, dst: 1, hash: hashOf(a, 0) },
      { src: 2, dst: 2, hash: hashOf(a, 1) },
      { src: 3, dst: 3, hash: hashOf(a, 2) },
    ]);
    expect(p.hierarchyStats()[0]).toMatchObject({ hostHitBlocks: 3, blocksLoaded: 3 });
    expect(p.hostNumUsedBlocks()).toEqual([3]);
    expect(p.takeTransfers()[0]!.loads).toEqual([]);
    p.check();
    // Decoding does not load again; finishing gives the host blocks back to the host cache.
    s.appendToken(9);
    s.kvCachedTokens = 13;
    expect(p.allocate(s, 14)).toBe(true);
    expect(p.takeTransfers()[0]!.loads).toEqual([]);
    p.deallocate(s);
    p.check();
    expect(p.hostNumUsedBlocks()).toEqual([0]);
    expect(p.hostNumBlocksInPrefixCache()).toEqual([3]);
  });

  it("a rank's transfers are plain data: a structured clone (a message to a worker) keeps the loads and the offload", () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    hostHoldsA(p, a);
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    runAndFinish(p, prompt(2, 700, 1));
    const [t] = p.takeTransfers();
    const copy = structuredClone(t!);
    expect(Object.keys(copy)).toEqual(['loads', 'offload']);
    expect(copy.loads.map((l) => [l.src, l.dst])).toEqual([[1, 1], [2, 2], [3, 3]]);
    expect(copy.offload!.blocks.map((b) => [b.src, b.dst])).toEqual(t!.offload!.blocks.map((b) => [b.src, b.dst]));
    p.completeOffload(t!.offload!);
    p.check();
  });

  it('check() notices a host table that is inconsistent or holds a block it does not own', () => {
    const p = pool();
    const s = attachedToHostHits(p);
    const h = s.state.host!;
    expect(h).toMatchObject({ numBlocks: 3, kvTokens: 12 });
    p.check();
    // Each inconsistency alone: no blocks, tokens not whole blocks, more tokens than the blocks hold.
    for (const [k, v] of [['numBlocks', 0], ['kvTokens', 6], ['kvTokens', 16]] as const) {
      const was = h[k];
      h[k] = v;
      expect(() => p.check()).toThrow(/^kvpool: a sequence's host state is inconsistent/);
      h[k] = was;
    }
    p.check();
    const id = h.table[2]!;
    h.table[2] = 9;
    expect(() => p.check()).toThrow(new RegExp(`^kvpool: rank 0 host block ${id} has 1 holders but sequences and plans hold it 0 times$`));
    h.table[2] = id;
    p.check();
  });

  it('loads only what the device cache misses', () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    runAndFinish(p, a);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    expect(p.managers[0]!.evict(1)).toBe(1); // the device keeps blocks 0 and 1 of A
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(2);
    const loads = p.takeTransfers()[0]!.loads;
    expect(loads.map((l) => [l.src, l.dst])).toEqual([[3, s.blockAt(2)]]);
    expect(s.kvCachedTokens).toBe(12);
    p.check();
  });

  it('applies the exact-prompt rule to host hits', () => {
    const p = pool();
    const a = prompt(3);
    hostHoldsA(p, a);
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    expect([...p.hostBlockTable(s)]).toEqual([1, 2]);
    expect(p.takeTransfers()[0]!.loads.map((l) => l.src)).toEqual([1, 2]);
    expect(s.kvCachedTokens).toBe(8);
    p.check();
  });

  it('copies at most maxCopyBlocks per step with allocateChunked', () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    hostHoldsA(p, a);
    const s = new Sequence(a);
    expect(p.allocateChunked(s, 13, 2)).toBe(true);
    expect(p.takeTransfers()[0]!.loads.map((l) => [l.src, l.dst])).toEqual([[1, 1], [2, 2]]);
    expect(s.kvCachedTokens).toBe(8);
    p.check();
    expect(p.allocateChunked(s, 13, 2)).toBe(true);
    expect(p.takeTransfers()[0]!.loads.map((l) => [l.src, l.dst])).toEqual([[3, 3]]);
    expect(s.kvCachedTokens).toBe(12);
    expect(p.allocateChunked(s, 13, 2)).toBe(true);
    expect(p.takeTransfers()[0]!.loads).toEqual([]);
    expect(p.hierarchyStats()[0]!.blocksLoaded).toBe(3);
    p.check();
  });

  it('refuses a load plan that would write a block the device does not hold, changing nothing', () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    hostHoldsA(p, a);
    const s = new Sequence(a);
    const before = {
      free: p.numFreeBlocks(),
      hostLru: [...p.hosts[0]!.lruOrder()],
      hostStats: p.hostStats(),
      devStats: p.stats(),
    };
    expect(() => p.allocate(s, 4)).toThrow(
      /numTokens = 4 leaves the sequence 1 device blocks, but the host holds 3 computed blocks .* device block 2/,
    );
    expect(s.dpRank).toBe(-1);
    expect(s.numBlocks).toBe(0);
    expect(p.numFreeBlocks()).toEqual(before.free);
    expect([...p.hosts[0]!.lruOrder()]).toEqual(before.hostLru);
    expect(p.hostStats()).toEqual(before.hostStats);
    expect(p.stats()).toEqual(before.devStats);
    expect(p.takeTransfers()[0]!.loads).toEqual([]);
    p.check();
    // A chunk that covers the copied blocks is fine.
    expect(p.allocateChunked(s, 8, 2)).toBe(true);
    expect(p.takeTransfers()[0]!.loads.length).toBe(2);
    expect(() => p.allocateChunked(s, 8, 1)).toThrow(/device block 2/);
    p.check();
  });

  it('counts the blocks the device cache still holds when it checks a load plan', () => {
    const p = pool();
    const a = prompt(3, 100, 1);
    hostHoldsA(p, a);
    // The device caches a's first two blocks again; the host holds all three.
    runAndFinish(p, [...a.slice(0, 2 * B), 7]);
    p.completeTransfersNow();
    const s = new Sequence(a);
    // The device's two hits need no copy; one copy (of block 2) goes to a block the device would not hold at 8 tokens.
    expect(() => p.allocateChunked(s, 8, 1)).toThrow(
      new RegExp(
        '^numTokens = 8 leaves the sequence 2 device blocks, but the host holds 3 computed blocks of its prompt: ' +
          'the load plan would write device block 2, which it does not hold \\(allocate at least 12 tokens, or copy fewer blocks with allocateChunked\\)$',
      ),
    );
    expect(s.dpRank).toBe(-1);
    expect(p.allocateChunked(s, 12, 1)).toBe(true);
    expect(s.sharedBlocks).toBe(2);
    expect(p.takeTransfers()[0]!.loads.map((l) => l.dst)).toEqual([s.blockTable[2]]);
    p.check();
  });

  it('attaches host hits through allocateShared, loading them at the next allocate', () => {
    const p = pool();
    const s = attachedToHostHits(p);
    expect([...p.hostBlockTable(s)]).toEqual([1, 2, 3]);
    p.check();
    expect(p.allocate(s)).toBe(true);
    expect(p.takeTransfers()[0]!.loads.length).toBe(3);
    p.deallocateWithoutCache(s);
    p.check();
    expect(p.hostNumUsedBlocks()).toEqual([0]);
  });

  it('rolls the host state back with a failed first allocation', () => {
    const p = pool(5);
    const a = prompt(3, 100, 1);
    hostHoldsA(p, a);
    const s = new Sequence(a);
    expect(p.allocateShared(s)).toBe(0);
    expect(p.hostNumUsedBlocks()).toEqual([3]);
    const big = new Sequence(prompt(2, 500));
    expect(p.allocate(big)).toBe(true);
    expect(p.allocate(s)).toBe(false);
    expect(p.hostNumUsedBlocks()).toEqual([0]);
    expect([...p.hostBlockTable(s)]).toEqual([]);
    p.check();
  });
});

describe('HierarchyBlockManagerPool single ids', () => {
  it('keeps the host state when the allocation fails for want of a single id', () => {
    const p = pool(16, 16, { singleBlockCapacity: 2 });
    const a = prompt(3, 100, 1);
    hostHoldsA(p, a);
    const x = new Sequence(prompt(1, 500));
    expect(p.allocate(x)).toBe(true); // takes the only single id
    const s = new Sequence(a);
    expect(p.allocateShared(s)).toBe(0);
    expect(p.allocate(s)).toBe(false);
    expect([...p.hostBlockTable(s)]).toEqual([1, 2, 3]);
    p.check();
    p.deallocate(x);
    expect(p.allocate(s)).toBe(true);
    expect(p.takeTransfers()[0]!.loads.map((l) => l.src)).toEqual([1, 2, 3]);
    p.check();
  });
});

describe('HierarchyBlockManagerPool validation', () => {
  it('rejects bad options and arguments with the state unchanged', () => {
    expect(() => new HierarchyBlockManagerPool({ numBlocks: 8, blockSize: 4 } as never)).toThrow(
      /options.hostNumBlocks must be a number, got undefined/,
    );
    expect(() => pool(8, 1)).toThrow(/options.hostNumBlocks must be >= 2, got 1/);
    expect(() => new HierarchyBlockManagerPool({ numBlocks: 8, blockSize: 4, hostNumBlocks: 4, bogus: 1 } as never)).toThrow(
      /unknown option "bogus"/,
    );
    const p = pool();
    const s = new Sequence(prompt(2));
    expect(() => p.allocateChunked(s, 8, -1)).toThrow(/maxCopyBlocks must be >= 0, got -1/);
    expect(() => p.allocateChunked(s, 1.5, 1)).toThrow(/numTokens must be an integer, got 1.5/);
    expect(() => p.completeOffload({ dpRank: 0, blocks: [] })).toThrow(/not an offload plan in flight/);
    expect(() => p.completeOffload({ dpRank: 5, blocks: [] })).toThrow(/^plan is not an offload plan in flight in this pool/);
    expect(() => p.completeOffload(null as never)).toThrow(/plan must be an object, got null/);
    runAndFinish(p, prompt(3, 100, 1));
    const plan = p.takeTransfers()[0]!.offload!;
    expect(() => p.completeOffload(plan, 1 as never)).toThrow(/ok must be a boolean, got 1/);
    expect(p.offloadsInFlight()).toEqual([plan]);
    p.check();
    const other = pool();
    expect(() => other.completeOffload(plan)).toThrow(/not an offload plan in flight/);
  });
});

describe('BlockManagerImpl.cacheByHashes (insert by stamped hash)', () => {
  it('caches ids under the given hashes, keeping an already cached hash', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    const ids = m.allocate(3)!;
    const h = hashBlocks(prompt(3), B);
    expect(m.cacheByHashes(ids, h)).toBe(3);
    expect([...m.lruOrder()]).toEqual([3, 2, 1]);
    expect([...m.blockHash(2)!]).toEqual([...h.subarray(16, 32)]);
    // A match over the same tokens finds them: the hashes are the chain keys.
    expect([...m.allocateShared(prompt(3))]).toEqual([1, 2, 3]);
    const dup = m.allocate(1)!;
    expect(m.cacheByHashes(dup, h.subarray(0, 16))).toBe(0);
    expect([...m.blockHash(dup[0]!)!]).toEqual([...h.subarray(0, 16)]);
    m.deallocate([...ids, ...dup, ...ids]);
    m.check();
    expect(m.numBlocksInPrefixCache()).toBe(3);
    expect(m.numFreeBlocks()).toBe(4);
    expect(() => m.cacheByHashes([1], new Uint8Array(15))).toThrow(/hashes must hold 16 bytes per id \(16\), got 15/);
    expect(() => m.cacheByHashes([1], [1] as never)).toThrow(/hashes must be a Uint8Array/);
    expect(() => m.cacheByHashes([5], new Uint8Array(16))).toThrow(/ids\[0\] = 5 has no holder left/);
    expect(() => m.cacheByHashes([1], new Uint8Array(16))).toThrow(/ids\[0\] = 1 has no holder left \(only the prefix cache/);
    expect(m.blockHash(5)).toBeNull();
    m.check();
    m.dispose();
  });
});

describe('host tier and tenant salts', () => {
  it("keys host blocks with the tenant's salt: one tenant's offloaded prefix is another's miss", () => {
    const p = pool(16, 32);
    const a = prompt(3, 100, 1);
    const tenant = (salt: string) => new Sequence(a, { cacheSalt: salt });
    // Tenant A computes the prompt; it is offloaded to the host, then the device cache empties.
    const s = tenant('A');
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = s.numTokens;
    p.deallocate(s);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    expect(p.managers[0]!.evict(100)).toBe(3);
    expect(p.hostNumBlocksInPrefixCache()).toEqual([3]);
    // Tenant B with the same tokens finds nothing on the host ...
    const b = tenant('B');
    expect(p.allocate(b)).toBe(true);
    expect(p.hostKvCachedTokens(b)).toBe(0);
    expect(b.kvCachedTokens).toBe(0);
    p.deallocateWithoutCache(b);
    // ... tenant A loads its three blocks back, and so would an unsalted sequence not.
    const again = tenant('A');
    expect(p.allocate(again)).toBe(true);
    expect(p.hostKvCachedTokens(again)).toBe(12);
    expect(p.takeTransfers()[0]!.loads.length).toBe(3);
    const none = new Sequence(a);
    expect(p.allocate(none)).toBe(true);
    expect(p.hostKvCachedTokens(none)).toBe(0);
    p.check();
  });
});

describe('the KV-cache store (prefetch_from_storage)', () => {
  const storePool = () => new HierarchyBlockManagerPool({ numBlocks: 16, blockSize: B, hostNumBlocks: 32, enableKvcacheStore: true });

  it('takes host blocks for the prompt after the host hits and asks the store for all but the last', () => {
    const p = storePool();
    const a = prompt(3, 100, 1); // 13 tokens: 4 blocks, the last partial
    const s = new Sequence(a);
    const plan = p.prefetchFromStorage(s)!;
    expect(plan.dpRank).toBe(0);
    // No host hits: blocks 0..3 get host ids 1..4; the store is asked for 0..2.
    expect(plan.blocks.map((b) => [b.src, b.dst, [...b.hash]])).toEqual([0, 1, 2].map((i) => [-1, i + 1, hashOf(a, i)]));
    expect(p.hostBlockTable(s).length).toBe(4);
    expect(p.hostKvCachedTokens(s)).toBe(0);
    p.check();
    // The store had the first two: they join the host prefix and its cache; the device loads them.
    expect(p.updatePrefetchResult(s, [3, 2])).toBe(2);
    expect(p.hostKvCachedTokens(s)).toBe(8);
    expect(p.hostNumBlocksInPrefixCache()).toEqual([2]);
    expect(p.allocate(s)).toBe(true);
    expect(s.kvCachedTokens).toBe(8);
    expect(p.takeTransfers()[0]!.loads.map((l) => [l.src, l.dst])).toEqual([[1, 1], [2, 2]]);
    expect(p.hierarchyStats()[0]).toMatchObject({ blocksPrefetched: 3, blocksFetched: 2, blocksLoaded: 2 });
    p.check();
    s.kvCachedTokens = 13;
    p.deallocate(s);
    p.check();
  });

  it('a prefetch plan carries its hashes packed too, and what a caller does to the plan does not change what is cached', () => {
    const p = storePool();
    const a = prompt(3, 100, 1);
    const s = new Sequence(a);
    const plan = p.prefetchFromStorage(s)!;
    expect(Array.from(plan.hashes)).toEqual(plan.blocks.flatMap((b) => [...b.hash]));
    expect(Object.isFrozen(plan.blocks)).toBe(true);
    expect(plan.blocks).toBe(plan.blocks); // made once
    // A structured clone (the plan posted to the store's workers) carries the blocks.
    const copy = structuredClone(plan);
    expect(copy.dpRank).toBe(0);
    expect(copy.blocks.map((b) => [b.dst, [...b.hash]])).toEqual(plan.blocks.map((b) => [b.dst, [...b.hash]]));
    plan.blocks[0]!.hash.fill(0xee);
    plan.hashes.fill(0xdd);
    expect(p.updatePrefetchResult(s, 3)).toBe(3);
    p.check();
    // The host cache holds a's true keys: a new prompt of a meets 3 host hits.
    const again = new Sequence(a);
    expect(p.prefetchFromStorage(again)).toBeNull(); // only the last, partial block is left: nothing to fetch
    expect(p.hostKvCachedTokens(again)).toBe(12);
  });

  it('chains on the host hits, fetches nothing for one block, and refuses without enableKvcacheStore or twice', () => {
    const p = storePool();
    const a = prompt(3, 100, 1);
    // Put blocks 0..2 of `a` on the host by an offload.
    runAndFinish(p, a);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    const longer = [...a.slice(0, 12), ...prompt(2, 700)]; // same first 3 blocks, then 2 new ones
    const s = new Sequence(longer);
    const plan = p.prefetchFromStorage(s)!;
    expect(p.hostKvCachedTokens(s)).toBe(12); // the host hits (3 blocks; 20 tokens, so no exact-prompt cut)
    expect(plan.blocks.map((b) => [...b.hash])).toEqual([hashOf(longer, 3)]); // blocks 3 and 4: only 3 is asked for
    expect(() => p.prefetchFromStorage(s)).toThrow(/a prefetch of this sequence is pending/);
    expect(p.updatePrefetchResult(s, 0)).toBe(0);
    expect(() => p.updatePrefetchResult(s, 0)).toThrow(/no prefetch of this sequence is pending/);
    p.check();
    const one = new Sequence(prompt(1)); // one block: nothing to fetch
    expect(p.prefetchFromStorage(one)).toBeNull();
    const plain = pool();
    expect(() => plain.prefetchFromStorage(new Sequence(a))).toThrow(/created without enableKvcacheStore/);
    expect(() => plain.updatePrefetchResult(new Sequence(a), 1)).toThrow(new TypeError('updatePrefetchResult: the pool was created without enableKvcacheStore'));
    expect(() => p.updatePrefetchResult(s, [] as never)).toThrow(/non-empty array of counts/);
  });

  it('a prefetch the host is short for returns null, keeping what eviction freed on the way (as any failed allocation)', () => {
    const p = storePool();
    const a = prompt(3, 100, 1);
    runAndFinish(p, a);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    const cached = p.hostNumBlocksInPrefixCache()[0]!;
    expect(cached).toBeGreaterThan(0);
    const evictedBefore = p.hostStats()[0]!.blocksEvicted;
    const big = new Sequence(prompt(40, 9000)); // 40 blocks: more than the host has (31)
    expect(p.prefetchFromStorage(big)).toBeNull();
    expect(p.hostNumBlocksInPrefixCache()[0]).toBe(0);
    expect(p.hostStats()[0]!.blocksEvicted - evictedBefore).toBe(cached);
    expect([...p.hostBlockTable(big)]).toEqual([]);
    expect(p.hostNumFreeBlocks()[0]).toBe(31);
    p.check();
  });

  it("a prefetch after host hits stores its blocks chained on the last host hit, as the store's events say", () => {
    const p = storePool();
    const a = prompt(3, 100, 1);
    runAndFinish(p, a);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    p.recordEvents(true);
    const longer = [...a.slice(0, 12), ...prompt(2, 700)];
    const s = new Sequence(longer);
    p.prefetchFromStorage(s);
    expect(p.updatePrefetchResult(s, 1)).toBe(1);
    const stored = p.drainEvents().filter((e) => e.type === 'stored' && e.medium === 'CPU');
    expect(stored.length).toBe(1);
    const e = stored[0] as BlockStoredEvent;
    expect([...e.hash]).toEqual(hashOf(longer, 3));
    expect([...e.parentHash!]).toEqual(hashOf(longer, 2));
    expect([...e.tokenIds]).toEqual(longer.slice(12, 16));
  });

  it('checks every delivered count and names it, changing nothing; a sequence never prefetched has nothing pending', () => {
    const p = storePool();
    const s = new Sequence(prompt(3, 100, 1));
    p.prefetchFromStorage(s);
    const before = p.hierarchyStats();
    expect(() => p.updatePrefetchResult(s, [3, 1.5])).toThrow(/^successCounts\[1\] must be an integer, got 1.5/);
    expect(() => p.updatePrefetchResult(s, [-1, 3])).toThrow(/^successCounts\[0\] must be >= 0, got -1/);
    expect(p.hierarchyStats()).toEqual(before);
    expect(p.updatePrefetchResult(s, [3, 1])).toBe(1); // still pending: the refused calls took nothing
    expect(() => p.updatePrefetchResult(new Sequence(prompt(2)), 1)).toThrow(/^updatePrefetchResult: no prefetch of this sequence is pending$/);
    p.check();
  });

  it("a prefetch gives its rank's lock back, whether it plans, finds nothing or is refused", () => {
    const p = storePool();
    const m = p.managers[0] as unknown as { lockDepth(): number };
    const s = new Sequence(prompt(3, 100, 1));
    expect(p.prefetchFromStorage(s)).not.toBeNull();
    expect(m.lockDepth()).toBe(0);
    expect(() => p.prefetchFromStorage(s)).toThrow(/a prefetch of this sequence is pending/);
    expect(m.lockDepth()).toBe(0);
    expect(p.prefetchFromStorage(new Sequence(prompt(1)))).toBeNull();
    expect(m.lockDepth()).toBe(0);
  });
});

describe('HierarchyBlockManagerPool.create', () => {
  it('loads the core and gives a working pool, with plain and with concurrent ranks, and refuses bad options', async () => {
    for (const more of [{}, { enableKvcacheStore: true }]) {
      const p = await HierarchyBlockManagerPool.create({ numBlocks: 16, blockSize: B, hostNumBlocks: 8, ...more });
      expect(p.hostNumBlocks).toBe(8);
      const s = new Sequence(prompt(2));
      expect(p.allocate(s)).toBe(true);
      p.check();
      p.dispose();
    }
    await expect(HierarchyBlockManagerPool.create({ numBlocks: 16, blockSize: B, hostNumBlocks: 1 })).rejects.toThrow(/options.hostNumBlocks must be >= 2, got 1/);
    expect(() => new HierarchyBlockManagerPool(null as never)).toThrow(/^options must be an object, got null/);
  });
});

// Found by the host-tier differential (a failed tryAllocate dropped a sequence
// still holding host blocks from the pool's live set; check() then failed).
const tokensFrom = (n: number, base: number) => Array.from({ length: n }, (_, i) => base + i);

describe('HierarchyBlockManagerPool tryAllocate', () => {
  it('a failed tryAllocate of a sequence holding host blocks keeps it live (or gives them back); the pool stays whole', () => {
    const p = new HierarchyBlockManagerPool({ numBlocks: 6, blockSize: B, hostNumBlocks: 16 });
    // A computes 3 full blocks and a token; finishing offloads the 3 blocks to the host.
    const a = new Sequence(tokensFrom(13, 100));
    expect(p.allocate(a)).toBe(true);
    a.kvCachedTokens = 13;
    p.deallocate(a);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    expect(p.resetPrefixCache()).toEqual([3]); // the device forgets them; the host keeps them
    // Another sequence takes all 5 device blocks.
    const filler = new Sequence(tokensFrom(20, 900));
    expect(p.allocate(filler)).toBe(true);
    // B has A's prompt: its match attaches A's 3 blocks from the host tier.
    const b = new Sequence(tokensFrom(13, 100));
    expect(p.allocateShared(b)).toBe(0);
    expect([...p.hostBlockTable(b)].length).toBe(3);
    // No device block for it: tryAllocate fails...
    expect(p.tryAllocate(b)).toBe(false);
    // ...and the pool must still account for what b holds.
    if (p.hostBlockTable(b).length > 0) expect(p.liveSequences().has(b)).toBe(true);
    expect(() => p.check()).not.toThrow();
    p.deallocate([b, filler]);
    expect(p.hostNumUsedBlocks()).toEqual([0]);
    p.check();
    p.dispose();
  });
});
