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
  numEvictable: i32 = 0; // cached entries nothing else holds
  heapSize: i32 = 0; // entries in the side heap (see lru.ts)
  tableMask: i32 = 0; // table capacity - 1 (power of two)
  head: i32 = 0; // least recent linked entry, 0 = none
  tail: i32 = 0; // most recent linked entry, 0 = none
  seed: u64 = 0;
  clock: u64 = 0; // LRU recency: each touch gets the next value (u32 stamps; see relabel in lru.ts)

  // Per-id state. The fields every cache operation touches live in one
  // 32-byte record per id (REC_* below), two to a cache line; the flags are a
  // byte array (64 KiB for 65,536 ids, so it stays in the nearest cache); the
  // fields only the side heap and the other eviction policies use are in a
  // cold array (AUX_*). The hot set of a 65,536-block manager is then ~3 MB
  // (records and table) instead of ~5 MB: on this machine a random read costs
  // ~20 ns in a 2-3 MB working set and 100+ ns past ~4 MB.
  recs: usize = 0; // record of id i at recs + (i << recShift)
  recShift: i32 = 0; // 5 with caching on (32-byte records), 2 without (ref only)
  flags: usize = 0; // u8[numBlocks]
  aux: usize = 0; // AUX_SIZE bytes per id, caching on only
  free: usize = 0; // i32[numBlocks]: free stack, top = free[freeTop - 1]
  heap: usize = 0; // i32[numBlocks]: side heap of returning entries by stamp
  table: usize = 0; // (u32 fingerprint, i32 id)[tableMask + 1]; id 0 = empty slot

  // Counters (monotonic).
  matchCalls: u64 = 0;
  blocksQueried: u64 = 0;
  blocksHit: u64 = 0;
  blocksInserted: u64 = 0;
  blocksEvicted: u64 = 0;
  blocksAllocated: u64 = 0;
  allocFailures: u64 = 0;
  peakUsed: i32 = 0; // highest numUsed so far (gauge for metrics)

  // KV-cache events (events.ts): recording flag and the growable record region.
  eventsOn: i32 = 0;
  eventsLen: i32 = 0; // bytes recorded
  eventsCap: i32 = 0;
  eventsLost: i32 = 0; // 1 when a record could not be stored (memory exhausted)
  events: usize = 0;

  // Eviction policy (lru.ts): POLICY_LRU keeps the recency list; the others
  // keep every entry in the side heap keyed by (REC_KEY, stamp).
  policy: i32 = 0;
  // POLICY_PRIORITY (priority.ts): the pool's clock, the heap of retentions by
  // expiry, and the per-position keys the next insert gives the blocks it visits.
  now: f64 = 0;
  expHeap: usize = 0; // i32[numBlocks]
  expSize: i32 = 0;
  batch: usize = 0; // (f64 priority, f64 expiry)[numBlocks]
}

export const CACHED: u8 = 1;
export const STAMPED: u8 = 2;
export const LINKED: u8 = 4; // in the LRU list
export const TOLD: u8 = 8; // announced in a stored event (events.ts)
// Every record flag is defined here so that no two features share a bit
// (0x80 is reserved for the audit's marks in manager-exports.ts).
export const LIVE: u8 = 16; // a linear-state slot held live by a sequence (linear-state.ts)
export const PENDING: u8 = 32; // a linear-state slot reserved for a checkpoint (linear-state.ts)
export const IN_HEAP: u8 = 64; // in the side heap (lru.ts); its position is AUX_HEAP_POS

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

// Record layout (byte offsets). Without caching only the reference count exists.
export const REC_REF: usize = 0; // i32: every reference, the cache's included
export const REC_STAMP: usize = 4; // u32: recency of a cached entry
export const REC_PREV: usize = 8; // i32: LRU list links (0 = none)
export const REC_NEXT: usize = 12; // i32
export const REC_HASH: usize = 16; // 16 bytes: the chain hash stamped on the block

// Cold per-id fields (byte offsets in an AUX_SIZE-byte slot of m.aux).
export const AUX_SIZE: usize = 24;
export const AUX_HEAP_POS: usize = 0; // i32: index + 1 in the side heap, 0 when absent
export const AUX_KEY: usize = 4; // u32: policy key, lower evicted first (LFU: hits; priority; unused under LRU)
export const AUX_EXPIRY: usize = 8; // f64: when the retention of a priority ends (priority.ts)
export const AUX_EXP_POS: usize = 16; // i32: index + 1 in the expiry heap, 0 when absent

/** Eviction policies (Manager.policy). */
export const POLICY_LRU: i32 = 0;
export const POLICY_LFU: i32 = 1;
export const POLICY_PRIORITY: i32 = 2;
/** The priority of a block nothing marked, and of one whose retention expired (TensorRT-LLM's). */
export const DEFAULT_PRIORITY: u32 = 35;

@inline export function aux(m: Manager, id: i32): usize {
  return m.aux + <usize>id * AUX_SIZE;
}

@inline export function keyOf(m: Manager, id: i32): u32 {
  return load<u32>(aux(m, id) + AUX_KEY);
}

@inline export function setKey(m: Manager, id: i32, v: u32): void {
  store<u32>(aux(m, id) + AUX_KEY, v);
}

@inline export function rec(m: Manager, id: i32): usize {
  return m.recs + (<usize>id << m.recShift);
}

@inline export function refOf(m: Manager, id: i32): i32 {
  return load<i32>(rec(m, id) + REC_REF);
}

@inline export function setRef(m: Manager, id: i32, v: i32): void {
  store<i32>(rec(m, id) + REC_REF, v);
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
  return rec(m, id) + REC_HASH;
}

@inline export function stampOf(m: Manager, id: i32): u32 {
  return load<u32>(rec(m, id) + REC_STAMP);
}

@inline export function setStamp(m: Manager, id: i32, v: u32): void {
  store<u32>(rec(m, id) + REC_STAMP, v);
}

/** Copies a 16-byte hash (two loads and stores; a bulk memory.copy costs a call into the engine). */
@inline export function copyHash(dst: usize, src: usize): void {
  store<u64>(dst, load<u64>(src));
  store<u64>(dst, load<u64>(src, 8), 8);
}
