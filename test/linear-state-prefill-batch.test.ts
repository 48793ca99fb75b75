// LinearStatePrefixCache.prefillBatch (one core call, used by the replay's
// linear-state rule) against what it stands for: resolveCacheOps over a
// restore op and save ops, then commitReservations. Two caches go through
// the same random history; after every batch they must agree on the result
// and on every slot's state, the eviction order and the counters.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LinearStatePrefixCache, prefillScratchBytes, type LinearStateCacheOp } from '../bindings/linear-state/linear-state-prefix-cache.js';
import type { CoreInstance } from '../bindings/core/core-instance.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { fewer } from './support/soak.js';

/** A 16-byte hash per number (few numbers: keys repeat within and across batches). */
function h(n: number): Uint8Array {
  const a = new Uint8Array(16);
  new DataView(a.buffer).setUint32(4, n * 2654435761, true);
  a[0] = n & 0xff;
  return a;
}

interface Batch {
  /** Hash numbers of boundaries 1..last. */
  keys: number[];
  /** Restore from this boundary (0: none). */
  restore: number;
  /** Live slots to take (and keep) before the batch: slot pressure. */
  takeLive: number;
  /** Hash numbers whose checkpoints are pinned from outside over the batch (match, then unpin after it). */
  pinOutside: number[];
}

const batchArb = fc.record({
  keys: fc.array(fc.integer({ min: 0, max: 30 }), { minLength: 1, maxLength: 24 }),
  restore: fc.nat({ max: 24 }),
  takeLive: fc.nat({ max: 2 }),
  pinOutside: fc.array(fc.integer({ min: 0, max: 30 }), { maxLength: 3 }),
});

function hashesOf(keys: number[]): Uint8Array {
  const out = new Uint8Array(keys.length * 16);
  keys.forEach((k, i) => out.set(h(k), i * 16));
  return out;
}

function state(c: LinearStatePrefixCache) {
  const slots = Array.from({ length: c.numSlots }, (_, s) => c.slotState(s));
  const { matchCalls, matchHits, checkpointsCommitted, checkpointsEvicted, freeSlots, liveSlots, pendingSlots, committedCheckpoints } = c.stats();
  const allocationFailures = c.slots.stats().allocationFailures; // reservations refused for lack of a slot
  return { slots, lru: [...c.lruOrder()], allocationFailures, matchCalls, matchHits, checkpointsCommitted, checkpointsEvicted, freeSlots, liveSlots, pendingSlots, committedCheckpoints };
}

describe('LinearStatePrefixCache.prefillBatch', () => {
  it('does what resolveCacheOps then commitReservations do, batch after batch', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 12 }), fc.array(batchArb, { minLength: 1, maxLength: 12 }), (numSlots, batches) => {
        const fast = new LinearStatePrefixCache({ numSlots });
        const slow = new LinearStatePrefixCache({ numSlots });
        try {
          for (const b of batches) {
            for (let i = 0; i < b.takeLive; i++) expect(fast.acquireLiveSlot()).toBe(slow.acquireLiveSlot());
            // Pins held outside the batch: the slots can run out with checkpoints the batch did not pin.
            const outside = b.pinOutside.map((k) => [fast.match(h(k)), slow.match(h(k))] as const);
            for (const [f, s] of outside) expect(f?.slot).toBe(s?.slot);
            const last = b.keys.length;
            const restore = Math.min(b.restore, last);
            const hashes = hashesOf(b.keys);
            const at = (k: number) => hashes.subarray((k - 1) * 16, k * 16);
            const ops: LinearStateCacheOp[] = [];
            if (restore > 0) ops.push({ liveSlot: -1, restoreHash: at(restore) });
            for (let k = restore + 1; k <= last; k++) ops.push({ liveSlot: -1, saveHash: at(k) });
            const before = slow.stats().checkpointsCommitted;
            const res = slow.resolveCacheOps(ops);
            slow.commitReservations(res);
            const r = fast.prefillBatch(hashes, restore, last);
            expect(r.restoredSlot).toBe(restore > 0 ? Math.max(0, res.restoreSrcSlots[0]!) : 0);
            expect(r.committed).toBe(slow.stats().checkpointsCommitted - before);
            expect(state(fast)).toEqual(state(slow));
            for (const [f, s] of outside) {
              if (f) fast.unpin(f);
              if (s) slow.unpin(s);
            }
            expect(state(fast)).toEqual(state(slow));
            fast.check();
          }
        } finally {
          fast.dispose();
          slow.dispose();
        }
      }),
      {
        numRuns: fewer(300),
        examples: [
          // The slots run out with only the restore's checkpoint committed; a later save of the restore key pins it again.
          [3, [{ keys: [1], restore: 0, takeLive: 0, pinOutside: [] }, { keys: [1, 2, 3, 4, 1], restore: 1, takeLive: 0, pinOutside: [] }]],
          // The restore key saved again before the slots run out, and a checkpoint pinned from outside saved after.
          [4, [{ keys: [1, 5], restore: 0, takeLive: 0, pinOutside: [] }, { keys: [1, 1, 2, 3, 4, 5], restore: 1, takeLive: 0, pinOutside: [5] }]],
        ],
      },
    );
  });

  it('validates its arguments before anything changes', () => {
    const c = new LinearStatePrefixCache({ numSlots: 4 });
    const before = state(c);
    expect(() => c.prefillBatch(new Uint8Array(16), 0, 2)).toThrow(/at least 32 bytes/);
    expect(() => c.prefillBatch(new Uint8Array(32), 3, 2)).toThrow(RangeError);
    expect(() => c.prefillBatch([1] as unknown as Uint8Array, 0, 0)).toThrow(TypeError);
    expect(state(c)).toEqual(before);
    c.dispose();
    expect(() => c.prefillBatch(new Uint8Array(16), 0, 1)).toThrow(/disposed/);
  });
});

describe('LinearStatePrefixCache.prefillBatchAt (the prefix hashes left in the core)', () => {
  const B = 4;
  /** A prompt of `blocks` blocks from a few shared heads, so later prompts hit earlier ones. */
  const promptArb = fc.record({ head: fc.nat({ max: 2 }), blocks: fc.integer({ min: 1, max: 9 }), tail: fc.nat({ max: 3 }), salt: fc.nat({ max: 5 }) });

  it('leaves in the core exactly the bytes prefixHashes gives, and commits what prefillBatch does, request after request', () => {
    fc.assert(
      fc.property(fc.array(promptArb, { minLength: 1, maxLength: 10 }), (prompts) => {
        const opts = { numBlocks: 48, blockSize: B, enableLinearState: true, linearStateNumSlots: 6 };
        const inCore = new BlockManagerPool(opts);
        const copied = new BlockManagerPool(opts);
        try {
          for (const q of prompts) {
            const tokens = Array.from({ length: q.blocks * B + q.tail }, (_, i) => (i < 2 * B ? q.head * 1000 + i : q.salt * 100 + i));
            const a = new Sequence(tokens);
            const b = new Sequence(tokens);
            expect(inCore.allocate(a)).toBe(copied.allocate(b));
            if (a.numBlocks === 0) continue;
            const full = Math.floor(a.numTokens / B);
            const h = a.sharedBlocks;
            expect(b.sharedBlocks).toBe(h);
            const cacheA = inCore.linearStateCache(a.dpRank);
            const left = inCore.prefixHashesIn(a, full, prefillScratchBytes(full - h))!;
            expect(left).not.toBeNull();
            expect(left.rt).toBe(cacheA.slots.rt);
            const want = b.prefixHashes();
            expect([...left.rt.u8.subarray(left.at, left.at + full * 16)]).toEqual([...want]);
            const ra = cacheA.prefillBatchAt(left, h, full);
            const rb = copied.linearStateCache(b.dpRank).prefillBatch(want, h, full);
            expect(ra).toEqual(rb);
            expect(state(cacheA)).toEqual(state(copied.linearStateCache(b.dpRank)));
            a.kvCachedTokens = a.numTokens;
            b.kvCachedTokens = b.numTokens;
            inCore.deallocate(a);
            copied.deallocate(b);
            inCore.check();
          }
        } finally {
          inCore.dispose();
          copied.dispose();
        }
      }),
      { numRuns: fewer(100) },
    );
  });

  it('refuses hashes left in another core, changing nothing', () => {
    const c = new LinearStatePrefixCache({ numSlots: 4 });
    const before = state(c);
    expect(() => c.prefillBatchAt({ rt: {} as CoreInstance, at: 0 }, 0, 1)).toThrow(/another core/);
    expect(state(c)).toEqual(before);
    c.dispose();
  });
});
