// A manager's header. Every per-block array hangs off it; the header itself
// is a plain region of linear memory (no managed objects), so JS can read
// the arrays directly for audits and views, and a shared-memory build can
// hand the same header to other threads.

@unmanaged
export class Manager {
  numBlocks: i32 = 0;
  blockSize: i32 = 0;
  prefixOn: i32 = 0; // 0: plain id pool (single-id managers, caching off)
  freeTop: i32 = 0; // ids on the free stack
  numUsed: i32 = 0; // ids held by anything other than the prefix cache
  numCached: i32 = 0; // prefix-cache entries (one block each)
  heapSize: i32 = 0; // evictable entries (cached, no other holder)
  tableMask: i32 = 0; // table capacity - 1 (power of two)
  seed: u64 = 0;
  clock: u64 = 0; // LRU recency: each touch gets the next value

  // Per-id arrays (pointers into linear memory).
  free: usize = 0; // i32[numBlocks]: free stack, top = free[freeTop - 1]
  ref: usize = 0; // i32[numBlocks]: every reference, the cache's included
  flags: usize = 0; // u8[numBlocks]: CACHED | STAMPED
  hash: usize = 0; // 16 bytes per id: the chain hash stamped on the block
  stamp: usize = 0; // u64[numBlocks]: recency of a cached entry
  heap: usize = 0; // i32[numBlocks]: min-heap of evictable ids by stamp
  heapPos: usize = 0; // i32[numBlocks]: index + 1 in `heap`, 0 when absent
  table: usize = 0; // i32[tableMask + 1]: open addressing, 0 = empty slot

  // Counters (monotonic).
  matchCalls: u64 = 0;
  blocksQueried: u64 = 0;
  blocksHit: u64 = 0;
  blocksInserted: u64 = 0;
  blocksEvicted: u64 = 0;
  blocksAllocated: u64 = 0;
  allocFailures: u64 = 0;
}

export const CACHED: u8 = 1;
export const STAMPED: u8 = 2;

// Error codes returned by exports (negative); the offending index is kept in
// `errorIndex` so the bindings can name the argument element.
export const ERR_UNSTAMPED_PARENT: i32 = -2;
export const ERR_OUT_OF_RANGE: i32 = -3;
export const ERR_PADDING: i32 = -4;
export const ERR_NOT_HELD: i32 = -5;
export const ERR_FREE: i32 = -6;

/** Index of the element an export rejected (read by the bindings for the message). */
export let errorIndex: i32 = -1;

export function setErrorIndex(i: i32): void {
  errorIndex = i;
}

@inline export function refOf(m: Manager, id: i32): i32 {
  return load<i32>(m.ref + (<usize>id << 2));
}

@inline export function setRef(m: Manager, id: i32, v: i32): void {
  store<i32>(m.ref + (<usize>id << 2), v);
}

@inline export function flagsOf(m: Manager, id: i32): u8 {
  return load<u8>(m.flags + <usize>id);
}

@inline export function setFlags(m: Manager, id: i32, v: u8): void {
  store<u8>(m.flags + <usize>id, v);
}

@inline export function isCached(m: Manager, id: i32): bool {
  return (flagsOf(m, id) & CACHED) != 0;
}

@inline export function hashPtr(m: Manager, id: i32): usize {
  return m.hash + (<usize>id << 4);
}

@inline export function stampOf(m: Manager, id: i32): u64 {
  return load<u64>(m.stamp + (<usize>id << 3));
}

@inline export function setStamp(m: Manager, id: i32, v: u64): void {
  store<u64>(m.stamp + (<usize>id << 3), v);
}
