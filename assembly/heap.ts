// Region allocator for the core's linear memory.
//
// The core never uses AssemblyScript's managed heap (runtime "stub"): every
// manager is a few flat arrays carved out of linear memory here. Regions are
// rare and large (one set per manager, a staging area), so an address-ordered
// free list that splits on allocation and merges neighbours on release is
// enough; what matters is that a huge or impossible request is a 0 return the
// bindings turn into a clear error, never a trap or a wrapped size, and that
// memory given back is usable again whatever its size.
//
// Sizes and addresses are unsigned 32-bit: the whole 4 GiB of a wasm32
// memory works. Arithmetic that can pass 2^32 is done in u64.
//
// The allocator's state lives in linear memory right after the data segments,
// in both builds. The shared-memory build runs one instance per thread over
// the same memory, and each instance has its own globals, so the state must be
// in memory there and changes under a spin lock; the single-threaded build
// uses the same layout without the lock.

import { REGION_ALIGN, MAX_REGION_BYTES, MAX_PAGES, MAX_CHUNKS } from "../bindings/core/abi";

// @ts-ignore: decorator
@inline const SHARED: bool = ASC_FEATURE_THREADS;
const ALIGN: usize = <usize>REGION_ALIGN;
const HEADER: usize = 16; // before each region: its size (u32), the next free region (u32), padding
/** A free region is split only when the rest can hold a header and this much. */
const MIN_SPLIT: usize = 64;

// The state block.
// @ts-ignore: decorator
@inline const STATE_LOCK: usize = 0; // i32: the region lock (shared build)
// @ts-ignore: decorator
@inline const STATE_THREADS: usize = 4; // i32: instances made so far
// @ts-ignore: decorator
@inline const STATE_TOP: usize = 8; // u32: first byte never handed out (0: state not set up yet)
// @ts-ignore: decorator
@inline const STATE_FREE: usize = 12; // u32: first free region, in address order
// @ts-ignore: decorator
@inline const STATE_CLEAN: usize = 16; // u32: every byte from here on was never handed out (still zero)
// @ts-ignore: decorator
@inline export const STATE_GEN: usize = 20; // u32: the last object generation handed out (handles.ts)
// @ts-ignore: decorator
@inline export const STATE_SLOT_FREE: usize = 24; // u32: first free header slot (handles.ts)
// @ts-ignore: decorator
@inline export const STATE_CHUNKS: usize = 28; // u32: chunks of header slots (handles.ts)
// @ts-ignore: decorator
@inline export const STATE_DIR: usize = 32; // u32[MAX_CHUNKS]: where each chunk is (handles.ts)
const STATE_SIZE: usize = 32 + 4 * <usize>MAX_CHUNKS;

// @ts-ignore: decorator
@inline export function stateBase(): usize {
  return (__heap_base + ALIGN - 1) & ~(ALIGN - 1);
}

// @ts-ignore: decorator
@inline export function getState(off: usize): u32 {
  return load<u32>(stateBase() + off);
}

// @ts-ignore: decorator
@inline export function setState(off: usize, v: u32): void {
  store<u32>(stateBase() + off, v);
}

// Region calls are rare and short (a manager or a staging area), so waiting
// threads spin; a spin also works on a browser's main thread, where waiting
// is not allowed. A thread killed inside a region call would leave the lock
// taken: after SPIN_LIMIT tries (seconds) the call gives up and says so
// through heapLockStuck(), instead of wedging every later region call.
// @ts-ignore: decorator
@inline const SPIN_LIMIT: i32 = 1 << 27;
let stuck: i32 = 0;

/** Takes the region lock (a no-op in the single-threaded build); false when it gave up. */
export function lockHeap(): bool {
  if (SHARED) {
    let n = 0;
    while (atomic.cmpxchg<i32>(stateBase() + STATE_LOCK, 0, 1) != 0) {
      if (++n == SPIN_LIMIT) {
        stuck = 1;
        return false;
      }
    }
  }
  if (getState(STATE_TOP) == 0) {
    const first = <u32>((stateBase() + STATE_SIZE + ALIGN - 1) & ~(ALIGN - 1));
    setState(STATE_TOP, first);
    setState(STATE_CLEAN, first);
  }
  return true;
}

export function unlockHeap(): void {
  if (SHARED) atomic.store<i32>(stateBase() + STATE_LOCK, 0);
}

/** 1 when a region call of this instance gave up waiting for the region lock (then cleared). */
export function heapLockStuck(): i32 {
  const s = stuck;
  stuck = 0;
  return s;
}

/** Byte offset of the allocator state (lock word first); for tests. */
export function heapState(): usize {
  return stateBase();
}

/** A process-wide id for the calling instance (shared build: 1, 2, ... in instantiation order). */
export function nextThreadId(): i32 {
  return SHARED ? atomic.add<i32>(stateBase() + STATE_THREADS, 1) + 1 : 1;
}

// @ts-ignore: decorator
@inline function sizeOf(r: usize): usize {
  return load<u32>(r - HEADER);
}

// @ts-ignore: decorator
@inline function setSize(r: usize, v: usize): void {
  store<u32>(r - HEADER, <u32>v);
}

// @ts-ignore: decorator
@inline function nextOf(r: usize): usize {
  return load<u32>(r - HEADER + 4);
}

// @ts-ignore: decorator
@inline function setNext(r: usize, v: usize): void {
  store<u32>(r - HEADER + 4, <u32>v);
}

/** Links `r` after `prev` (0: at the head). */
// @ts-ignore: decorator
@inline function link(prev: usize, r: usize): void {
  if (prev == 0) setState(STATE_FREE, <u32>r);
  else setNext(prev, r);
}

/** Makes [start, end) of linear memory exist; false when memory cannot grow that far. */
function ensureMemory(end: u64): bool {
  const have = (<u64>memory.size()) << 16;
  if (end <= have) return true;
  const pages = <i32>((end - have + 0xffff) >> 16);
  if (<u64>memory.size() + <u64>pages > <u64>MAX_PAGES) return false;
  return memory.grow(pages) >= 0;
}

/** Zeroes [r, r + size): only the part below the clean mark can hold old data. */
function zero(r: usize, size: usize): void {
  const clean = <usize>getState(STATE_CLEAN);
  if (r >= clean) return;
  const end = r + size;
  memory.fill(r, 0, (end < clean ? end : clean) - r);
}

/** A zeroed region of `bytes` bytes, 16-byte aligned, or 0 when memory is exhausted or `bytes` is too large. */
export function alloc(bytes: usize): usize {
  if (bytes > <usize>MAX_REGION_BYTES) return 0;
  if (!lockHeap()) return 0;
  const r = allocLocked(bytes);
  unlockHeap();
  return r;
}

/** alloc() with the region lock already held (handles.ts). */
export function allocLocked(bytes: usize): usize {
  if (bytes > <usize>MAX_REGION_BYTES) return 0;
  const size = (max<usize>(bytes, 1) + ALIGN - 1) & ~(ALIGN - 1);
  // First fit among given-back regions, in address order.
  let prev: usize = 0;
  let cur = <usize>getState(STATE_FREE);
  while (cur != 0) {
    const have = sizeOf(cur);
    if (have >= size) {
      const rest = have - size;
      if (rest >= HEADER + MIN_SPLIT) {
        const tail = cur + size + HEADER;
        setSize(tail, rest - HEADER);
        setNext(tail, nextOf(cur));
        link(prev, tail);
        setSize(cur, size);
      } else {
        link(prev, nextOf(cur));
      }
      setNext(cur, 0);
      zero(cur, sizeOf(cur));
      return cur;
    }
    prev = cur;
    cur = nextOf(cur);
  }
  const t = <u64>getState(STATE_TOP);
  const start = t + <u64>HEADER;
  const end = start + <u64>size;
  // The top stays below 2^32 so that it fits its u32 (4 GiB minus 16 bytes is the most).
  if (end > 0xfffffff0 || !ensureMemory(end)) return 0;
  const r = <usize>start;
  setState(STATE_TOP, <u32>end);
  setSize(r, size);
  setNext(r, 0);
  zero(r, size);
  if (end > <u64>getState(STATE_CLEAN)) setState(STATE_CLEAN, <u32>end);
  return r;
}

/**
 * Gives a region back. It merges with free neighbours, and a free run that
 * ends at the top lowers the top, so any size can be handed out again.
 */
export function release(ptr: usize): void {
  if (ptr == 0) return;
  if (!lockHeap()) return; // the region is lost rather than the lock broken
  releaseLocked(ptr);
  unlockHeap();
}

function releaseLocked(ptr: usize): void {
  let pp: usize = 0; // the free region before prev
  let prev: usize = 0;
  let cur = <usize>getState(STATE_FREE);
  while (cur != 0 && cur < ptr) {
    pp = prev;
    prev = cur;
    cur = nextOf(cur);
  }
  if (cur == ptr) return; // already free: never done by the bindings; ignored rather than corrupting the list
  let size = sizeOf(ptr);
  let after = cur;
  if (cur != 0 && ptr + size + HEADER == cur) {
    size += HEADER + sizeOf(cur);
    after = nextOf(cur);
  }
  let node = ptr;
  let before = prev;
  if (prev != 0 && prev + sizeOf(prev) + HEADER == ptr) {
    size += HEADER + sizeOf(prev);
    node = prev;
    before = pp;
  }
  if (<u64>node + <u64>size == <u64>getState(STATE_TOP)) {
    // The run ends at the top: it goes back to the untouched part.
    link(before, after);
    setState(STATE_TOP, <u32>(node - HEADER));
    return;
  }
  setSize(node, size);
  setNext(node, after);
  link(before, node);
}

/** Bytes of linear memory handed out so far (regions given back below the top included). */
export function heapTop(): usize {
  return SHARED ? atomic.load<u32>(stateBase() + STATE_TOP) : getState(STATE_TOP);
}

/** Bytes in given-back regions below the top (for tests of the allocator). */
export function heapFreeBytes(): f64 {
  if (!lockHeap()) return -1;
  let total: f64 = 0;
  for (let cur = <usize>getState(STATE_FREE); cur != 0; cur = nextOf(cur)) total += <f64>sizeOf(cur);
  unlockHeap();
  return total;
}
