// The eviction order: a binary min-heap of evictable ids keyed by recency.
//
// The reference keeps one LRU list of all cached blocks and, on every
// eviction, walks it from the least recent end skipping blocks a sequence
// still holds. Taking the least recent *evictable* entries first gives the
// same victims in the same order; keeping only evictable ids in a heap makes
// each victim O(log n) however many cached blocks are held (the reference
// rescans them all on every call). A held entry leaves the heap; when its
// last holder lets go it comes back with the recency it had.

import { Manager, stampOf } from "./layout";

@inline function heapAt(m: Manager, i: i32): i32 {
  return load<i32>(m.heap + (<usize>i << 2));
}

@inline function place(m: Manager, i: i32, id: i32): void {
  store<i32>(m.heap + (<usize>i << 2), id);
  store<i32>(m.heapPos + (<usize>id << 2), i + 1);
}

@inline export function inHeap(m: Manager, id: i32): bool {
  return load<i32>(m.heapPos + (<usize>id << 2)) != 0;
}

function siftUp(m: Manager, i: i32, id: i32): void {
  const key = stampOf(m, id);
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const p = heapAt(m, parent);
    if (stampOf(m, p) <= key) break;
    place(m, i, p);
    i = parent;
  }
  place(m, i, id);
}

function siftDown(m: Manager, i: i32, id: i32): void {
  const key = stampOf(m, id);
  const n = m.heapSize;
  while (true) {
    let child = 2 * i + 1;
    if (child >= n) break;
    let c = heapAt(m, child);
    let ck = stampOf(m, c);
    if (child + 1 < n) {
      const c2 = heapAt(m, child + 1);
      const k2 = stampOf(m, c2);
      if (k2 < ck) {
        child++;
        c = c2;
        ck = k2;
      }
    }
    if (key <= ck) break;
    place(m, i, c);
    i = child;
  }
  place(m, i, id);
}

export function heapPush(m: Manager, id: i32): void {
  const i = m.heapSize++;
  siftUp(m, i, id);
}

export function heapRemove(m: Manager, id: i32): void {
  const posAddr = m.heapPos + (<usize>id << 2);
  const i = load<i32>(posAddr) - 1;
  store<i32>(posAddr, 0);
  const last = heapAt(m, --m.heapSize);
  if (last == id) return;
  // Move the last element into the hole and restore order in whichever direction it breaks.
  if (i > 0 && stampOf(m, last) < stampOf(m, heapAt(m, (i - 1) >> 1))) siftUp(m, i, last);
  else siftDown(m, i, last);
}

/** The least recent evictable id, removed from the heap (the heap must not be empty). */
export function heapPop(m: Manager): i32 {
  const top = heapAt(m, 0);
  store<i32>(m.heapPos + (<usize>top << 2), 0);
  const last = heapAt(m, --m.heapSize);
  if (m.heapSize > 0) siftDown(m, 0, last);
  return top;
}

/** After an entry's recency moved forward (a refresh), restore heap order. */
export function heapIncreased(m: Manager, id: i32): void {
  const i = load<i32>(m.heapPos + (<usize>id << 2)) - 1;
  siftDown(m, i, id);
}

/** Audit: heap order, positions, and size. Returns false on any violation. */
export function heapValid(m: Manager): bool {
  const n = m.heapSize;
  for (let i = 0; i < n; i++) {
    const id = heapAt(m, i);
    if (id <= 0 || id >= m.numBlocks) return false;
    if (load<i32>(m.heapPos + (<usize>id << 2)) != i + 1) return false;
    if (i > 0 && stampOf(m, heapAt(m, (i - 1) >> 1)) > stampOf(m, id)) return false;
  }
  return true;
}
