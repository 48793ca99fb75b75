// Region allocator for the core's linear memory.
//
// The core never uses AssemblyScript's managed heap (runtime "stub"): every
// manager is a few flat arrays carved out of linear memory here. Regions are
// rare and large (one set per manager, one staging area), so a first-fit free
// list over a bump pointer is enough; what matters is that running out of
// memory is a 0 return the bindings turn into a clear error, never a trap.

const ALIGN: usize = 16;
const HEADER: usize = 16; // size of the region (usize) + next free region, padded

// The shared-memory build (threads enabled) runs one instance per thread over
// the same memory, and each instance has its own globals: there the
// allocator's state lives in linear memory right after the data segments
// (which every instantiation re-applies, so nothing mutable may sit in them)
// and changes under a spin lock. The single-threaded build keeps plain globals.
// @ts-ignore: decorator
@inline const SHARED: bool = ASC_FEATURE_THREADS;
// Shared state block: lock (i32), thread counter (i32), top, free list.
// @ts-ignore: decorator
@inline const STATE_LOCK: usize = 0;
// @ts-ignore: decorator
@inline const STATE_THREADS: usize = 4;
// @ts-ignore: decorator
@inline const STATE_TOP: usize = 8;
// @ts-ignore: decorator
@inline const STATE_FREE: usize = 12;
// @ts-ignore: decorator
@inline const STATE_SIZE: usize = 64;

let top: usize = 0; // first byte never handed out
let freeList: usize = 0; // regions given back, linked through their headers

// @ts-ignore: decorator
@inline function stateBase(): usize {
  return (__heap_base + ALIGN - 1) & ~(ALIGN - 1);
}

// @ts-ignore: decorator
@inline function getTop(): usize {
  return SHARED ? load<usize>(stateBase() + STATE_TOP) : top;
}

// @ts-ignore: decorator
@inline function setTop(v: usize): void {
  if (SHARED) store<usize>(stateBase() + STATE_TOP, v);
  else top = v;
}

// @ts-ignore: decorator
@inline function getFree(): usize {
  return SHARED ? load<usize>(stateBase() + STATE_FREE) : freeList;
}

// @ts-ignore: decorator
@inline function setFree(v: usize): void {
  if (SHARED) store<usize>(stateBase() + STATE_FREE, v);
  else freeList = v;
}

// Region calls are rare and short (a manager or a staging area), so waiting
// threads spin; a spin also works on a browser's main thread, where waiting
// is not allowed. A thread killed inside a region call would leave the lock
// taken: after SPIN_LIMIT tries (seconds) the call gives up and says so
// through heapLockStuck(), instead of wedging every later region call.
// @ts-ignore: decorator
@inline const SPIN_LIMIT: i32 = 1 << 27;
let stuck: i32 = 0;

// @ts-ignore: decorator
@inline function lockHeap(): bool {
  if (SHARED) {
    let n = 0;
    while (atomic.cmpxchg<i32>(stateBase() + STATE_LOCK, 0, 1) != 0) {
      if (++n == SPIN_LIMIT) {
        stuck = 1;
        return false;
      }
    }
  }
  return true;
}

// @ts-ignore: decorator
@inline function unlockHeap(): void {
  if (SHARED) atomic.store<i32>(stateBase() + STATE_LOCK, 0);
}

/** 1 when a region call of this instance gave up waiting for the region lock (then cleared). */
export function heapLockStuck(): i32 {
  const s = stuck;
  stuck = 0;
  return s;
}

/** Byte offset of the shared allocator state (lock word first); for tests. */
export function heapState(): usize {
  return SHARED ? stateBase() : 0;
}

/** A process-wide id for the calling instance (shared build: 1, 2, ... in instantiation order). */
export function nextThreadId(): i32 {
  return SHARED ? atomic.add<i32>(stateBase() + STATE_THREADS, 1) + 1 : 1;
}

function alignUp(n: usize): usize {
  return (n + ALIGN - 1) & ~(ALIGN - 1);
}

function ensureMemory(end: usize): bool {
  const have = (<usize>memory.size()) << 16;
  if (end <= have) return true;
  const pages = <i32>((end - have + 0xffff) >> 16);
  return memory.grow(pages) >= 0;
}

/** A zeroed region of `bytes` bytes, 16-byte aligned, or 0 when memory is exhausted. */
export function alloc(bytes: usize): usize {
  if (!lockHeap()) return 0;
  const r = allocLocked(bytes);
  unlockHeap();
  return r;
}

function allocLocked(bytes: usize): usize {
  let t = getTop();
  if (t == 0) t = SHARED ? stateBase() + STATE_SIZE : alignUp(__heap_base);
  const size = alignUp(bytes > 0 ? bytes : 1);
  // First fit among given-back regions.
  let prev: usize = 0;
  let cur = getFree();
  while (cur != 0) {
    const curSize = load<usize>(cur - HEADER);
    const next = load<usize>(cur - HEADER + sizeof<usize>());
    if (curSize >= size) {
      if (prev == 0) setFree(next);
      else store<usize>(prev - HEADER + sizeof<usize>(), next);
      memory.fill(cur, 0, curSize);
      return cur;
    }
    prev = cur;
    cur = next;
  }
  const start = t + HEADER;
  const end = start + size;
  if (end < start || !ensureMemory(end)) {
    setTop(t);
    return 0;
  }
  setTop(end);
  store<usize>(start - HEADER, size);
  store<usize>(start - HEADER + sizeof<usize>(), 0);
  memory.fill(start, 0, size); // memory given back to a grown page is zero, reused tops may not be
  return start;
}

/** Gives a region back; it is reused by later allocations of at most its size. */
export function release(ptr: usize): void {
  if (ptr == 0) return;
  if (!lockHeap()) return; // the region is lost rather than the lock broken
  store<usize>(ptr - HEADER + sizeof<usize>(), getFree());
  setFree(ptr);
  unlockHeap();
}

/** Bytes of linear memory handed out so far (regions given back included). */
export function heapTop(): usize {
  return SHARED ? atomic.load<usize>(stateBase() + STATE_TOP) : top;
}
