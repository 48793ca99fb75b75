// BlockManagerPool with linear state (docs/linear-state.md).

import { describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerPool, type BlockManagerPoolOptions } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { blockTokens } from './support/block-tokens.js';
import { heapInUse } from './support/core-memory.js';

const B = 4;
const prompt = (blocks: number, extra = 0, base = 100): number[] => blockTokens(B, blocks, base, extra);
function pool(more: Partial<BlockManagerPoolOptions> = {}) {
  return new BlockManagerPool({ numBlocks: 16, blockSize: B, enableLinearState: true, linearStateNumSlots: 8, ...more });
}
/** Prefills `tokens` in a fresh sequence and finishes it: its full blocks enter the KV prefix cache. */
function warm(p: BlockManagerPool, tokens: number[]) {
  const s = new Sequence(tokens);
  expect(p.allocate(s)).toBe(true);
  s.kvCachedTokens = s.numTokens;
  p.deallocate(s);
}
/** Commits checkpoints at the given block boundaries (1-based: boundary k = after block k-1) of `tokens`. */
function checkpoint(p: BlockManagerPool, tokens: number[], boundaries: number[], rank = 0) {
  const hashes = hashBlocks(tokens, B);
  const c = p.linearStateCache(rank);
  for (const k of boundaries) c.commit(c.reserveCheckpoint(hashes.slice((k - 1) * 16, k * 16)).reservation!);
}

describe('pool with linear state: trimming shared blocks', () => {
  // The worked example of docs/linear-state.md: KV hits block0..block3, checkpoints at hash0, hash1, hash3.
  for (const reuse of ['furthest', 'contiguous'] as const) {
    it(`${reuse}: a prompt of exactly four blocks reuses block0, block1`, () => {
      const p = pool({ linearStateReuse: reuse });
      const t = prompt(4);
      warm(p, t);
      checkpoint(p, t, [1, 2, 4]);
      const s = new Sequence(t);
      expect(p.allocate(s)).toBe(true);
      expect(s.sharedBlocks).toBe(2);
      expect(s.kvCachedTokens).toBe(2 * B);
      expect([...s.blockTable]).toEqual([1, 2, 5, 6]); // 3 and 4 stay cached, unheld
      expect(p.numUsedBlocks()).toEqual([4]); // exact: the trimmed blocks are only cached
      expect(p.numBlocksInPrefixCache()).toEqual([4]);
      // Boundary 3 lacked a checkpoint; boundary 4 was beyond the leave-one-token cap.
      expect(p.linearStateStats()[0]!.trimmedBlocks).toBe(1);
      p.check();
      p.deallocate(s);
      p.check();
    });
  }

  it('furthest: one token longer reuses all four blocks (the gap at hash2 is fine)', () => {
    const p = pool();
    const t = prompt(4, 1);
    warm(p, t);
    checkpoint(p, t, [1, 2, 4]);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(4);
    expect(s.kvCachedTokens).toBe(16);
    expect(p.linearStateStats()[0]!.trimmedBlocks).toBe(0);
    p.check();
  });

  it('contiguous: one token longer stops at the first boundary without a checkpoint', () => {
    const p = pool({ linearStateReuse: 'contiguous' });
    const t = prompt(4, 1);
    warm(p, t);
    checkpoint(p, t, [1, 2, 4]);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(2);
    expect(p.linearStateStats()[0]!.trimmedBlocks).toBe(2);
    expect(p.numUsedBlocks()).toEqual([5]);
    p.check();
  });

  it('sparse checkpoints: a lone checkpoint at hash3 reuses four blocks (furthest) or none (contiguous)', () => {
    for (const [reuse, shared] of [['furthest', 4], ['contiguous', 0]] as const) {
      const p = pool({ linearStateReuse: reuse });
      const t = prompt(5, 2);
      warm(p, t);
      checkpoint(p, t, [4]);
      const s = new Sequence(t);
      expect(p.allocate(s)).toBe(true);
      expect(s.sharedBlocks).toBe(shared);
      expect(s.kvCachedTokens).toBe(shared * B);
      expect(p.numUsedBlocks()).toEqual([6]); // trimmed blocks are only cached
      p.check();
    }
  });

  it('no checkpoint at all: nothing is reused, the blocks stay cached', () => {
    const p = pool();
    const t = prompt(3, 1);
    warm(p, t);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(0);
    expect(p.numBlocksInPrefixCache()).toEqual([3]);
    expect([...s.blockTable]).toEqual([4, 5, 6, 7]); // fresh ids, the cached 1..3 are left alone
    p.check();
  });

  it('exact prompt with every boundary checkpointed: the cap keeps three blocks (no pop needed)', () => {
    const p = pool();
    const t = prompt(4);
    warm(p, t);
    checkpoint(p, t, [1, 2, 3, 4]);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(3);
    expect(s.kvCachedTokens).toBe(12);
    expect(p.linearStateStats()[0]!.trimmedBlocks).toBe(0);
    expect(p.numUsedBlocks()).toEqual([4]);
    p.check();
  });

  it('tryAllocate trims the same way', () => {
    const p = pool();
    const t = prompt(4, 1);
    warm(p, t);
    checkpoint(p, t, [2]);
    const s = new Sequence(t);
    expect(p.tryAllocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(2);
    expect(s.numBlocks).toBe(5);
    expect(s.kvCachedTokens).toBe(17);
    p.check();
  });

  it('checkpoints in another rank do not count', () => {
    const p = pool({ dpSize: 2 });
    const t = prompt(3, 1);
    warm(p, t); // rank 0
    checkpoint(p, t, [1, 2, 3], 1);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    expect(s.dpRank).toBe(1); // rank 1 has more free blocks
    expect(s.sharedBlocks).toBe(0);
    p.check();
  });
});

describe('pool with linear state: live slots', () => {
  it('every sequence gets a live slot with its single id, released on deallocate', () => {
    const p = pool({ linearStateNumSlots: 4 });
    const a = new Sequence(prompt(1)), b = new Sequence(prompt(1, 0, 200));
    expect(a.linearStateSlotId).toBe(-1);
    expect(p.allocate(a)).toBe(true);
    expect(p.allocate(b)).toBe(true);
    expect([a.linearStateSlotId, b.linearStateSlotId]).toEqual([1, 2]);
    expect(a.linearStateInitialized).toBe(false);
    p.check();
    // check() compares the live slots with those the sequences hold: a slot
    // not live, a slot dropped, a slot held twice.
    const differ = /^kvpool: rank 0 linear-state live slots \[1, 2\] differ from those sequences and open batches hold/;
    a.state.linearSlot = 3;
    expect(() => p.check()).toThrow(differ);
    a.state.linearSlot = -1;
    expect(() => p.check()).toThrow(differ);
    a.state.linearSlot = 2;
    expect(() => p.check()).toThrow(/^kvpool: linear-state slot 2 is held by two sequences$/);
    a.state.linearSlot = 1;
    p.check();
    p.deallocate(a);
    expect(a.linearStateSlotId).toBe(-1);
    expect([...p.linearStateCache(0).liveSlots()]).toEqual([2]);
    p.deallocateWithoutCache(b);
    expect(p.linearStateCache(0).numFreeSlots()).toBe(3);
    p.check();
  });

  it('dispose gives the linear-state cache its memory back with the rest of the pool, whatever the rank kind', () => {
    const rt = plainCore();
    const kinds: Partial<BlockManagerPoolOptions>[] = [
      {},
      { managerTypes: [1, 0], compressRatios: [1, 1], slidingWindowSize: 8, enablePrefixCache: false },
      { enableXtensor: true, numLayers: 1, slotSize: 2, pageSize: 12, enablePrefixCache: false },
    ];
    for (const kind of kinds) {
      const use = () => {
        const p = pool({ linearStateNumSlots: 64, ...kind });
        expect(p.allocate(new Sequence(prompt(2)))).toBe(true);
        return p;
      };
      use().dispose(); // the core's shared staging areas grow to their size once
      const before = heapInUse(rt);
      const p = use();
      expect(heapInUse(rt)).toBeGreaterThan(before);
      p.dispose();
      expect(heapInUse(rt)).toBe(before);
    }
  });

  it('no live slot: the allocation fails and the single id is rolled back', () => {
    const p = pool({ linearStateNumSlots: 2 });
    const a = new Sequence(prompt(1)), b = new Sequence(prompt(1, 0, 200));
    expect(p.allocate(a)).toBe(true);
    expect(p.allocate(b)).toBe(false);
    expect(b.singleBlockId).toBe(-1);
    expect(b.numBlocks).toBe(0);
    expect(p.stats()[0]!.singleBlocksUsed).toBe(1);
    expect(p.numUsedBlocks()).toEqual([1]);
    p.check();
    p.deallocate(a);
    expect(p.allocate(b)).toBe(true);
    expect(b.linearStateSlotId).toBe(1);
    p.check();
  });

  it('a live slot evicts the least recent unpinned checkpoint when the slots run out', () => {
    const p = pool({ linearStateNumSlots: 3 });
    const t = prompt(2, 1);
    checkpoint(p, t, [1, 2]); // slots 1 (hash0), 2 (hash1)
    const s = new Sequence(prompt(1, 0, 300));
    expect(p.allocate(s)).toBe(true);
    expect(s.linearStateSlotId).toBe(1);
    expect(p.linearStateStats()[0]).toMatchObject({ checkpointsEvicted: 1, committedCheckpoints: 1 });
    p.check();
  });

  it('a failed KV allocation gives back the single id and the live slot together', () => {
    const p = pool({ numBlocks: 3 });
    const s = new Sequence(prompt(3));
    expect(p.allocate(s)).toBe(false);
    expect(s.linearStateSlotId).toBe(-1);
    expect(s.singleBlockId).toBe(-1);
    expect(p.linearStateCache(0).liveSlots().length).toBe(0);
    p.check();
  });

  it('a fork gets its own live slot on its first allocation', () => {
    const p = pool();
    const a = new Sequence(prompt(2));
    expect(p.allocate(a)).toBe(true);
    const f = a.fork();
    expect(f.linearStateSlotId).toBe(-1);
    expect(p.allocate(f)).toBe(true);
    expect(f.linearStateSlotId).toBe(2);
    p.check();
  });

  it('validates the linear-state options', () => {
    expect(() => pool({ linearStateReuse: 'longest' as never })).toThrow(/linearStateReuse must be 'furthest' or 'contiguous', got "longest"/);
    expect(() => pool({ linearStateNumSlots: 1 })).toThrow(/options.linearStateNumSlots must be >= 2, got 1/);
    expect(() => pool({ enableLinearState: 1 as never })).toThrow(TypeError);
    const plain = new BlockManagerPool({ numBlocks: 8, blockSize: B });
    expect(() => plain.linearStateCache(0)).toThrow(/without enableLinearState/);
    expect(() => p0().linearStateCache(1)).toThrow(/dpRank must be in \[0, 0\], got 1/);
    function p0() {
      return pool();
    }
  });
});

describe('pool with linear state: dp rank choice', () => {
  it('skips ranks whose single ids are exhausted, falling back to rank 0', () => {
    const p = pool({ dpSize: 2, singleBlockCapacity: 2 });
    const a = new Sequence([]), b = new Sequence([]), c = new Sequence([]);
    expect(p.allocate(a)).toBe(true); // tie -> rank 0, takes its only single id
    expect(a.dpRank).toBe(0);
    expect(p.allocate(b)).toBe(true); // rank 0 has as many free blocks but no single id
    expect(b.dpRank).toBe(1);
    expect(p.allocate(c)).toBe(false); // every rank skipped: rank 0, and the allocation fails
    expect(c.dpRank).toBe(0);
    p.check();
  });

  it('without linear state, the tie still goes to rank 0 (and fails there)', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, dpSize: 2, singleBlockCapacity: 2 });
    const a = new Sequence([]), b = new Sequence([]);
    expect(p.allocate(a)).toBe(true);
    expect(p.allocate(b)).toBe(false);
    expect(b.dpRank).toBe(0);
  });
});

describe('pool with linear state: prefix hashes and cache ops', () => {
  it('prefix hashes reuse the stamped KV chain and match hashBlocks', () => {
    const p = pool();
    const t = prompt(3, 2);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    const expected = hashBlocks(t, B);
    expect(s.prefixHashes()).toEqual(expected); // computed: nothing is stamped yet
    s.kvCachedTokens = s.numTokens;
    p.cache(s);
    expect(s.prefixHashes()).toEqual(expected); // from the stamps
    expect(s.prefixHash(8)).toEqual(expected.slice(16, 32));
    expect(s.prefixHashes(7)).toEqual(expected.slice(0, 16));
    expect(() => s.prefixHash(6)).toThrow(/multiple of the block size 4, got 6/);
    expect(() => s.prefixHash(0)).toThrow(RangeError);
    expect(() => new Sequence(t).prefixHashes()).toThrow(/not been placed/);
  });

  /** A pool with checkpoints at blocks 1 and 2 of a 4-block prompt, and a sequence of it placed there (2 blocks shared). */
  function placedOnCheckpoints() {
    const p = pool();
    const t = prompt(4);
    warm(p, t);
    checkpoint(p, t, [1, 2]);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(2);
    return { p, t, s };
  }

  it('a restore-then-save batch: first forward restores from the trimmed boundary, saves at the prompt end', () => {
    const { p, t, s } = placedOnCheckpoints();
    const op = p.linearStateCacheOp(s, s.numTokens);
    const hashes = hashBlocks(t, B);
    expect(op.liveSlot).toBe(s.linearStateSlotId);
    expect(op.restoreHash).toEqual(hashes.slice(16, 32));
    expect(op.saveHash).toEqual(hashes.slice(48, 64));
    expect(s.linearStateInitialized).toBe(true);
    const c = p.linearStateCache(0);
    // 0 < kvCachedTokens < prompt: chunked prefill, so the save promotes the live slot.
    const live = s.linearStateSlotId;
    const res = c.resolveCacheOps([op], [s]);
    expect(res.restoreSrcSlots[0]).toBe(2);
    expect(res.saveDstSlots[0]).toBe(live);
    p.check(); // the replacement slot is held by the open batch
    c.commitReservations(res);
    expect(c.contains(hashes.slice(48, 64))).toBe(true);
    expect(s.linearStateInitialized).toBe(false);
    // Decode: the fresh slot restores from the promoted checkpoint; no save (not prefill).
    s.kvCachedTokens = s.numTokens;
    s.appendToken(1);
    const op2 = p.linearStateCacheOp(s, s.numTokens);
    expect(op2.restoreHash).toEqual(hashes.slice(48, 64));
    expect(op2.saveHash).toBeNull();
    const op3 = p.linearStateCacheOp(s, s.numTokens);
    expect(op3.restoreHash).toBeNull();
    p.check();
  });

  it('markLinearStateInitialized: a sequence whose state is already in its slot restores nothing', () => {
    const { p, s } = placedOnCheckpoints();
    expect(s.linearStateInitialized).toBe(false);
    s.markLinearStateInitialized();
    expect(s.linearStateInitialized).toBe(true);
    expect(p.linearStateCacheOp(s, s.numTokens).restoreHash).toBeNull(); // without the mark, block 2's checkpoint
    p.check();
  });

  it('a rejected cache-op call changes nothing', () => {
    const p = pool();
    const s = new Sequence(prompt(2, 1));
    expect(() => p.linearStateCacheOp(s, 4)).toThrow(/not been allocated/);
    expect(p.allocate(s)).toBe(true);
    expect(() => p.linearStateCacheOp(s, 99)).toThrow(/stepEnd must be in \[0, 9\], got 99/);
    expect(s.linearStateInitialized).toBe(false);
    const other = new BlockManagerPool({ numBlocks: 8, blockSize: B, enableLinearState: true });
    expect(() => other.linearStateCacheOp(s, 4)).toThrow(/another pool/);
    expect(s.linearStateInitialized).toBe(false);
    p.check();
  });

  it('chunked prefill promotes the live slot; the sequence restores from it next', () => {
    const p = pool();
    const t = prompt(4, 1);
    const s = new Sequence(t);
    expect(p.allocate(s)).toBe(true);
    const c = p.linearStateCache(0);
    const live = s.linearStateSlotId;
    const op1 = p.linearStateCacheOp(s, 8); // first chunk: a plain reservation
    const r1 = c.resolveCacheOps([op1], [s]);
    expect(r1.promotions).toEqual([]);
    c.commitReservations(r1);
    s.kvCachedTokens = 8;
    const op2 = p.linearStateCacheOp(s, 16); // second chunk: chunked prefill
    const r2 = c.resolveCacheOps([op2], [s]);
    expect(r2.promotions).toHaveLength(1);
    expect(r2.saveDstSlots[0]).toBe(live);
    c.commitReservations(r2);
    expect(s.linearStateSlotId).not.toBe(live);
    expect(s.linearStateInitialized).toBe(false);
    expect(c.slotState(live)).toBe('committed');
    s.kvCachedTokens = 16;
    const op3 = p.linearStateCacheOp(s, 17);
    expect(op3.restoreHash).toEqual(hashBlocks(t, B).slice(48, 64));
    p.check();
    p.deallocate(s);
    p.check();
  });

  it("refuses a sequence of another rank in a cache's batch: its live slot number names another sequence's slot there", () => {
    const p = new BlockManagerPool({ numBlocks: 64, blockSize: B, dpSize: 2, enableLinearState: true, linearStateNumSlots: 8 });
    const a = new Sequence(prompt(3, 1));
    const b = new Sequence(prompt(3, 500));
    expect(p.allocate(a, B)).toBe(true);
    expect(p.allocate(b, B)).toBe(true);
    expect(a.dpRank).not.toBe(b.dpRank);
    expect(a.linearStateSlotId).toBe(b.linearStateSlotId); // the same number, each in its own rank's cache
    a.kvCachedTokens = B; // chunked prefill: a promotion if the slot were a's
    expect(p.allocate(a, 2 * B)).toBe(true);
    const op = p.linearStateCacheOp(a, 2 * B);
    const wrong = p.linearStateCache(b.dpRank);
    const before = [...Array(8).keys()].map((i) => wrong.slotState(i));
    expect(() => wrong.resolveCacheOps([op], [a])).toThrow(
      new RangeError(`sequences[0] holds live slot ${a.linearStateSlotId} of another linear-state cache (a sequence of another rank, or of another pool)`),
    );
    expect([...Array(8).keys()].map((i) => wrong.slotState(i))).toEqual(before);
    expect(wrong.openPins()).toEqual([]);
    expect(() => wrong.resolveCacheOps([op], [{} as never])).toThrow(/sequences\[0\] must be a pool's Sequence, null or undefined, got/);
    // On its own rank's cache the same batch promotes a's slot.
    const right = p.linearStateCache(a.dpRank);
    const r = right.resolveCacheOps([op], [a]);
    expect(r.promotions).toHaveLength(1);
    right.commitReservations(r);
    p.check();
  });
});
