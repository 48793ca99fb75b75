// Unit tests of LinearStatePrefixCache: every slot-state transition (docs/linear-state.md).

import { describe, expect, it } from 'vitest';
import { LinearStatePrefixCache } from '../bindings/linear-state/linear-state-prefix-cache.js';
import { Sequence } from '../bindings/pool/sequence.js';

/** A distinct 16-byte hash per number. */
function h(n: number): Uint8Array {
  const a = new Uint8Array(16);
  new DataView(a.buffer).setUint32(0, n, true);
  a[15] = 0xab;
  return a;
}
function cache(numSlots: number) {
  return new LinearStatePrefixCache({ numSlots });
}
/** A committed checkpoint of hash n (reserve + commit); returns its slot. */
function put(c: LinearStatePrefixCache, n: number): number {
  const r = c.reserveCheckpoint(h(n));
  expect(r.reservation).not.toBeNull();
  return c.commit(r.reservation!);
}

describe('LinearStatePrefixCache slots', () => {
  it('hands out live slots 1, 2, ... and reuses them LIFO; slot 0 is padding', () => {
    const c = cache(4);
    expect([c.acquireLiveSlot(), c.acquireLiveSlot(), c.acquireLiveSlot()]).toEqual([1, 2, 3]);
    expect(c.acquireLiveSlot()).toBeNull();
    c.releaseLiveSlot(2);
    c.releaseLiveSlot(1);
    expect(c.slotState(2)).toBe('free');
    expect(c.acquireLiveSlot()).toBe(1);
    expect(c.acquireLiveSlot()).toBe(2);
    expect(c.slotState(0)).toBe('live');
    c.check();
  });

  it('validates arguments and leaves the state unchanged', () => {
    const c = cache(4);
    const s = c.acquireLiveSlot()!;
    expect(() => c.releaseLiveSlot(0)).toThrow(RangeError);
    expect(() => c.releaseLiveSlot(4)).toThrow(/slot must be in \[1, 3\], got 4/);
    expect(() => c.releaseLiveSlot(2)).toThrow(/slot = 2 is free, not live/);
    expect(() => c.releaseLiveSlot(1.5)).toThrow(RangeError);
    expect(() => c.match(new Uint8Array(15))).toThrow(/hash must be a 16-byte Uint8Array.*length 15/);
    expect(() => c.contains([1, 2] as unknown as Uint8Array)).toThrow(TypeError);
    expect(() => c.reserveCheckpoint(null as unknown as Uint8Array)).toThrow(TypeError);
    expect(() => new LinearStatePrefixCache({ numSlots: 1 })).toThrow(/options.numSlots must be >= 2, got 1/);
    expect(() => new LinearStatePrefixCache({ numSlots: 3, x: 1 } as never)).toThrow(/unknown option "x"/);
    expect(() => new LinearStatePrefixCache({ numSlots: 2 ** 31 - 1 })).toThrow(/^kvpool: Wasm memory exhausted creating a linear-state cache of 2147483647 slots/);
    const gone = cache(4);
    gone.dispose();
    expect(() => gone.match(h(1))).toThrow(/^kvpool: this LinearStatePrefixCache was disposed; it cannot be used any more$/);
    const r = c.reserveCheckpoint(h(1)).reservation!;
    expect(() => c.releaseLiveSlot(r.slot)).toThrow(/is pending, not live/);
    c.commit(r);
    expect(() => c.commit(r)).toThrow(/not an open reservation/);
    expect(() => c.abort(r)).toThrow(/not an open reservation/);
    const pin = c.match(h(1))!;
    c.unpin(pin);
    expect(() => c.unpin(pin)).toThrow(/not an open pin/);
    expect(c.liveSlots()).toEqual(Int32Array.from([s]));
    expect(c.slotState(r.slot)).toBe('committed');
    c.check();
  });

  it('pending checkpoints are invisible to match and contains, and not evictable', () => {
    const c = cache(3);
    const r = c.reserveCheckpoint(h(7));
    expect(r.slot).toBe(1);
    expect(c.slotState(1)).toBe('pending');
    expect(c.contains(h(7))).toBe(false);
    expect(c.match(h(7))).toBeNull();
    expect(c.acquireLiveSlot()).toBe(2);
    expect(c.acquireLiveSlot()).toBeNull(); // the pending slot is not taken
    expect(c.reserveCheckpoint(h(8))).toEqual({ slot: -1, reservation: null });
    expect(c.commit(r.reservation!)).toBe(1);
    expect(c.contains(h(7))).toBe(true);
    expect(c.slotState(1)).toBe('committed');
    c.check();
  });

  it('abort returns the reserved slot to the free pool', () => {
    const c = cache(3);
    const r = c.reserveCheckpoint(h(1)).reservation!;
    expect(c.numFreeSlots()).toBe(1);
    c.abort(r);
    expect(c.numFreeSlots()).toBe(2);
    expect(c.slotState(r.slot)).toBe('free');
    expect(c.contains(h(1))).toBe(false);
    expect(c.acquireLiveSlot()).toBe(r.slot);
    c.check();
  });

  it('reserving a committed hash touches it and returns its slot without a reservation', () => {
    const c = cache(4);
    const a = put(c, 1);
    const b = put(c, 2);
    expect([...c.lruOrder()]).toEqual([a, b]);
    expect(c.reserveCheckpoint(h(1))).toEqual({ slot: a, reservation: null });
    expect([...c.lruOrder()]).toEqual([b, a]);
    c.check();
  });

  it('a second commit of the same hash keeps the existing checkpoint and frees its own slot', () => {
    const c = cache(4);
    const r1 = c.reserveCheckpoint(h(5)).reservation!;
    const r2 = c.reserveCheckpoint(h(5)).reservation!;
    expect([r1.slot, r2.slot]).toEqual([1, 2]);
    expect(c.commit(r2)).toBe(2);
    expect(c.commit(r1)).toBe(2);
    expect(c.slotState(1)).toBe('free');
    expect(c.numCheckpoints()).toBe(1);
    c.check();
  });

  it('evicts the least recent unpinned checkpoint, one per call, when no slot is free', () => {
    const c = cache(4);
    const s1 = put(c, 1), s2 = put(c, 2), s3 = put(c, 3);
    expect([s1, s2, s3]).toEqual([1, 2, 3]);
    const pin = c.match(h(1))!; // 1 is now the most recent, and pinned
    expect([...c.lruOrder()]).toEqual([2, 3, 1]);
    expect(c.acquireLiveSlot()).toBe(2); // evicts 2
    expect(c.contains(h(2))).toBe(false);
    expect(c.acquireLiveSlot()).toBe(3); // evicts 3
    expect(c.acquireLiveSlot()).toBeNull(); // only the pinned 1 is left
    expect(c.stats()).toMatchObject({ liveSlots: 2, committedCheckpoints: 1, pinnedCheckpoints: 1, checkpointsEvicted: 2, freeSlots: 0 });
    c.check();
    c.unpin(pin);
    expect(c.acquireLiveSlot()).toBe(1);
    expect(c.numCheckpoints()).toBe(0);
    c.check();
  });

  it('match makes the entry most recent; contains does not', () => {
    const c = cache(5);
    put(c, 1); put(c, 2); put(c, 3);
    expect(c.contains(h(1))).toBe(true);
    expect([...c.lruOrder()]).toEqual([1, 2, 3]);
    c.unpin(c.match(h(2))!);
    expect([...c.lruOrder()]).toEqual([1, 3, 2]);
    expect(c.stats()).toMatchObject({ matchCalls: 1, matchHits: 1 });
    expect(c.match(h(9))).toBeNull();
    expect(c.stats()).toMatchObject({ matchCalls: 2, matchHits: 1 });
    c.check();
  });

  it('two pins on one checkpoint keep it until both are released', () => {
    const c = cache(2);
    put(c, 1);
    const p1 = c.match(h(1))!, p2 = c.match(h(1))!;
    c.check();
    c.unpin(p1);
    expect(c.acquireLiveSlot()).toBeNull();
    c.unpin(p2);
    expect(c.acquireLiveSlot()).toBe(1);
    c.check();
  });
});

describe('LinearStatePrefixCache batch flow', () => {
  it('restores are matched and pinned before saves, so a save cannot evict a restore source', () => {
    const c = cache(3);
    put(c, 1); put(c, 2); // 1 least recent
    const res = c.resolveCacheOps([
      { liveSlot: -1, saveHash: h(3) },
      { liveSlot: -1, restoreHash: h(1) },
    ]);
    expect([...res.restoreSrcSlots]).toEqual([-1, 1]);
    // The save had to evict: 1 is pinned, so 2 goes.
    expect([...res.saveDstSlots]).toEqual([2, -1]);
    expect(c.contains(h(2))).toBe(false);
    expect(c.slotState(2)).toBe('pending');
    c.check();
    c.commitReservations(res);
    expect(c.contains(h(3))).toBe(true);
    expect(c.openPins()).toEqual([]);
    expect([...c.lruOrder()]).toEqual([1, 2]);
    c.check();
    expect(() => c.commitReservations(res)).toThrow(/not an open batch/);
  });

  it('duplicate saves in one batch share one slot', () => {
    const c = cache(5);
    const res = c.resolveCacheOps([
      { liveSlot: -1, saveHash: h(4) },
      { liveSlot: -1, saveHash: h(5) },
      { liveSlot: -1, saveHash: h(4) },
    ]);
    expect([...res.saveDstSlots]).toEqual([1, 2, 1]);
    expect(res.reservations.map((r) => r.slot)).toEqual([1, 2]);
    c.commitReservations(res);
    expect(c.numCheckpoints()).toBe(2);
    expect(c.numFreeSlots()).toBe(2);
    c.check();
  });

  it('a save to a committed hash pins it for the batch, so a later save cannot take its slot', () => {
    const c = cache(3);
    put(c, 1); put(c, 2);
    const res = c.resolveCacheOps([
      { liveSlot: -1, saveHash: h(1) },
      { liveSlot: -1, saveHash: h(9) },
    ]);
    // 1 was touched and pinned: the second save evicts 2, never 1.
    expect([...res.saveDstSlots]).toEqual([1, 2]);
    expect(res.savePins.map((p) => p.slot)).toEqual([1]);
    expect(c.contains(h(1))).toBe(true);
    c.check();
    c.commitReservations(res);
    expect(c.openPins()).toEqual([]);
    c.check();
  });

  it('a save with every slot live or pinned gets -1 and no reservation', () => {
    const c = cache(3);
    c.acquireLiveSlot(); c.acquireLiveSlot();
    const res = c.resolveCacheOps([{ liveSlot: 1, saveHash: h(1) }, { liveSlot: 2, saveHash: h(1) }]);
    expect([...res.saveDstSlots]).toEqual([-1, -1]);
    expect(res.reservations).toEqual([]);
    c.commitReservations(res);
    c.check();
  });

  function chunked(slot: number): Sequence {
    const s = new Sequence(new Array(32).fill(7));
    s.state.linearSlot = slot;
    s.state.kvCached = 8; // 0 < kv < prompt: chunked prefill
    return s;
  }

  it('promotes the live slot of a sequence in chunked prefill; the sequence gets a fresh slot', () => {
    const c = cache(4);
    const live = c.acquireLiveSlot()!;
    const seq = chunked(live);
    seq.state.linearInit = true;
    const res = c.resolveCacheOps([{ liveSlot: live, saveHash: h(3) }], [seq]);
    expect([...res.saveDstSlots]).toEqual([live]);
    expect(res.promotions).toHaveLength(1);
    expect(res.promotions[0]).toMatchObject({ liveSlot: 1, replacement: 2 });
    expect(res.reservations).toEqual([]);
    expect(c.slotState(2)).toBe('live');
    c.check();
    expect(c.commitReservations(res)).toBe(1);
    expect(seq.linearStateSlotId).toBe(2);
    expect(seq.linearStateInitialized).toBe(false);
    expect(c.slotState(1)).toBe('committed');
    expect(c.contains(h(3))).toBe(true);
    expect([...c.liveSlots()]).toEqual([2]);
    c.check();
  });

  it('does not promote outside chunked prefill (first chunk or decode): it reserves', () => {
    const c = cache(4);
    const live = c.acquireLiveSlot()!;
    const first = chunked(live);
    first.state.kvCached = 0;
    const res = c.resolveCacheOps([{ liveSlot: live, saveHash: h(3) }], [first]);
    expect(res.promotions).toEqual([]);
    expect(res.reservations.map((r) => r.slot)).toEqual([2]);
    c.abortCacheOps(res);
    expect(c.slotState(2)).toBe('free');
    c.check();
  });

  it('skips a promotion whose sequence changed its live slot before commit, giving the replacement back', () => {
    const c = cache(4);
    const live = c.acquireLiveSlot()!;
    const seq = chunked(live);
    const res = c.resolveCacheOps([{ liveSlot: live, saveHash: h(3) }], [seq]);
    // The sequence was preempted and got another slot meanwhile.
    const other = c.acquireLiveSlot()!;
    c.releaseLiveSlot(live);
    seq.state.linearSlot = other;
    expect(other).toBe(3);
    expect(c.commitReservations(res)).toBe(0);
    expect(seq.linearStateSlotId).toBe(other);
    expect(c.contains(h(3))).toBe(false);
    expect([...c.liveSlots()]).toEqual([other]);
    c.check();
  });

  it('promotion falls back to a reservation when no replacement slot is free', () => {
    const c = cache(2);
    const live = c.acquireLiveSlot()!;
    const res = c.resolveCacheOps([{ liveSlot: live, saveHash: h(3) }], [chunked(live)]);
    expect(res.promotions).toEqual([]);
    expect([...res.saveDstSlots]).toEqual([-1]);
    c.commitReservations(res);
    c.check();
  });

  it('validates the whole batch first', () => {
    const c = cache(4);
    put(c, 1);
    expect(() => c.resolveCacheOps([{ liveSlot: -1, restoreHash: h(1) }, { liveSlot: 9 }])).toThrow(/ops\[1\].liveSlot must be in \[-1, 3\], got 9/);
    expect(() => c.resolveCacheOps([{ liveSlot: -1, saveHash: new Uint8Array(3) }])).toThrow(/ops\[0\].saveHash/);
    expect(() => c.resolveCacheOps([{ liveSlot: -1 }], [])).toThrow(/aligned/);
    expect(() => c.resolveCacheOps('x' as never)).toThrow(TypeError);
    expect(c.openPins()).toEqual([]);
    expect(c.stats().matchCalls).toBe(0);
    c.check();
  });
});
