// Region allocator for the core's linear memory.
//
// The core never uses AssemblyScript's managed heap (runtime "stub"): every
// manager is a few flat arrays carved out of linear memory here. Regions are
// rare and large (one set per manager, one staging area), so a first-fit free
// list over a bump pointer is enough; what matters is that running out of
// memory is a 0 return the bindings turn into a clear error, never a trap.

const ALIGN: usize = 16;
const HEADER: usize = 16; // size of the region (usize) + next free region, padded

let top: usize = 0; // first byte never handed out
let freeList: usize = 0; // regions given back, linked through their headers

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
  if (top == 0) top = alignUp(__heap_base);
  const size = alignUp(bytes > 0 ? bytes : 1);
  // First fit among given-back regions.
  let prev: usize = 0;
  let cur = freeList;
  while (cur != 0) {
    const curSize = load<usize>(cur - HEADER);
    const next = load<usize>(cur - HEADER + sizeof<usize>());
    if (curSize >= size) {
      if (prev == 0) freeList = next;
      else store<usize>(prev - HEADER + sizeof<usize>(), next);
      memory.fill(cur, 0, curSize);
      return cur;
    }
    prev = cur;
    cur = next;
  }
  const start = top + HEADER;
  const end = start + size;
  if (end < start || !ensureMemory(end)) return 0;
  top = end;
  store<usize>(start - HEADER, size);
  store<usize>(start - HEADER + sizeof<usize>(), 0);
  memory.fill(start, 0, size); // memory given back to a grown page is zero, reused tops may not be
  return start;
}

/** Gives a region back; it is reused by later allocations of at most its size. */
export function release(ptr: usize): void {
  if (ptr == 0) return;
  store<usize>(ptr - HEADER + sizeof<usize>(), freeList);
  freeList = ptr;
}

/** Bytes of linear memory handed out so far (regions given back included). */
export function heapTop(): usize {
  return top;
}
