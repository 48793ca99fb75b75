// The handle table: fixed-size slots that hold object headers (managers,
// linear-state caches).
//
// The bindings refer to an object by its header's address. A slot is never
// given back to the region allocator, so an address that once named a header
// names a header slot for the life of the memory: a stale handle (its object
// destroyed, the slot perhaps reused) or a forged one can only reach a slot,
// and the slot's magic word and generation, set last on creation and cleared
// first on destruction, tell it apart from the object it claims to be. The
// slot's lock words (HDR_LOCK) belong to the slot and survive reuse, so a
// thread holding a stale handle can take the lock, see the generation differ,
// and let go without touching anything else.
//
// Slots come in chunks; a directory of chunks (in the allocator's state
// block) lets `slotValid` check that an address is a slot at all.

import {
  SLOT_SIZE, SLOTS_PER_CHUNK, MAX_CHUNKS, HDR_MAGIC, HDR_GEN, HDR_LOCK, LOCK_BYTES,
} from "../bindings/core/abi";
import {
  lockHeap, unlockHeap, allocLocked, getState, setState, stateBase, STATE_GEN, STATE_SLOT_FREE, STATE_CHUNKS, STATE_DIR,
} from "./heap";

// @ts-ignore: decorator
@inline const SHARED: bool = ASC_FEATURE_THREADS;
const SLOT: usize = <usize>SLOT_SIZE;
const CHUNK_BYTES: usize = SLOT * <usize>SLOTS_PER_CHUNK;
/** Where a free slot keeps the next free slot (inside what is a header's body when in use). */
const SLOT_NEXT: usize = <usize>HDR_LOCK + <usize>LOCK_BYTES;

/**
 * A zeroed header slot (its lock words kept), magic and generation 0, or 0
 * when memory or the table is exhausted. Call `slotPublish` once the header
 * is filled in.
 */
export function slotNew(): usize {
  if (!lockHeap()) return 0;
  let s = <usize>getState(STATE_SLOT_FREE);
  if (s == 0) {
    const n = getState(STATE_CHUNKS);
    if (n >= <u32>MAX_CHUNKS) {
      unlockHeap();
      return 0;
    }
    const c = allocLocked(CHUNK_BYTES);
    if (c == 0) {
      unlockHeap();
      return 0;
    }
    store<u32>(stateBase() + STATE_DIR + (<usize>n << 2), <u32>c);
    setState(STATE_CHUNKS, n + 1);
    // Chain the chunk's slots so that the lowest address is handed out first.
    for (let i = <usize>SLOTS_PER_CHUNK; i > 0; i--) {
      const p = c + (i - 1) * SLOT;
      store<u32>(p + SLOT_NEXT, <u32>s);
      s = p;
    }
  }
  setState(STATE_SLOT_FREE, load<u32>(s + SLOT_NEXT));
  unlockHeap();
  memory.fill(s + SLOT_NEXT, 0, SLOT - SLOT_NEXT);
  return s;
}

/** Stamps a filled-in header with its kind and a generation no other object of this memory had. */
export function slotPublish(s: usize, magic: u32): void {
  let gen: u32;
  if (SHARED) {
    do gen = atomic.add<u32>(stateBase() + STATE_GEN, 1) + 1;
    while (gen == 0);
    atomic.store<u32>(s + <usize>HDR_GEN, gen);
    atomic.store<u32>(s + <usize>HDR_MAGIC, magic);
  } else {
    gen = getState(STATE_GEN) + 1;
    if (gen == 0) gen = 1;
    setState(STATE_GEN, gen);
    store<u32>(s + <usize>HDR_GEN, gen);
    store<u32>(s + <usize>HDR_MAGIC, magic);
  }
}

/** Ends an object: magic and generation cleared first, then the slot goes back to the table. */
export function slotFree(s: usize): void {
  if (SHARED) {
    atomic.store<u32>(s + <usize>HDR_MAGIC, 0);
    atomic.store<u32>(s + <usize>HDR_GEN, 0);
  } else {
    store<u32>(s + <usize>HDR_MAGIC, 0);
    store<u32>(s + <usize>HDR_GEN, 0);
  }
  if (!lockHeap()) return; // the slot is lost rather than the lock broken
  store<u32>(s + SLOT_NEXT, getState(STATE_SLOT_FREE));
  setState(STATE_SLOT_FREE, <u32>s);
  unlockHeap();
}

/** 1 when `s` is a header slot holding a live object of kind `magic` and generation `gen`; else 0. */
export function slotValid(s: usize, gen: u32, magic: u32): i32 {
  if (gen == 0) return 0;
  const n = SHARED ? atomic.load<u32>(stateBase() + STATE_CHUNKS) : getState(STATE_CHUNKS);
  for (let i: u32 = 0; i < n; i++) {
    const c = <usize>load<u32>(stateBase() + STATE_DIR + (<usize>i << 2));
    if (s >= c && s - c < CHUNK_BYTES) {
      if ((s - c) % SLOT != 0) return 0;
      const m = SHARED ? atomic.load<u32>(s + <usize>HDR_MAGIC) : load<u32>(s + <usize>HDR_MAGIC);
      const g = SHARED ? atomic.load<u32>(s + <usize>HDR_GEN) : load<u32>(s + <usize>HDR_GEN);
      return m == magic && g == gen ? 1 : 0;
    }
  }
  return 0;
}
