// A manager's header. Every per-block array hangs off it; the header itself
// is a plain region of linear memory (no managed objects), so JS can read
// the arrays directly for audits and views, and a shared-memory build can
// hand the same header to other threads.

import {
  FLAG_CACHED, FLAG_STAMPED, FLAG_LINKED, FLAG_TOLD, FLAG_LIVE, FLAG_PENDING, FLAG_AUDIT_MARK, FLAG_IN_HEAP,
  ERR_UNSTAMPED_PARENT as E_UNSTAMPED_PARENT, ERR_OUT_OF_RANGE as E_OUT_OF_RANGE, ERR_PADDING as E_PADDING,
  ERR_NOT_HELD as E_NOT_HELD, ERR_FREE as E_FREE, ERR_TOKENS_MISSING as E_TOKENS_MISSING, ERR_EVENTS_ON as E_EVENTS_ON,
  AUX_SIZE as A_SIZE, AUX_EXPIRY as A_EXPIRY, AUX_EXP_POS as A_EXP_POS,
  META_SIZE as M_SIZE, META_SHIFT as M_SHIFT, META_REFS as M_REFS, META_STAMP as M_STAMP, META_FP as M_FP, META_HEAP_POS as M_HEAP_POS, META_HASH as M_HASH,
  POLICY_LRU as P_LRU, POLICY_LFU as P_LFU, POLICY_PRIORITY as P_PRIORITY,
} from "../bindings/core/abi";

// The header sits in a slot of the handle table (handles.ts); its first four
// fields are the slot's (offsets HDR_* in bindings/core/abi.ts, checked by
// abi_check): kind, generation and the lock a shared-memory manager runs under.
@unmanaged
export class Manager {
  magic: u32 = 0;
  gen: u32 = 0;
  lockWord: i32 = 0;
  lockDepth: i32 = 0;
  numBlocks: i32 = 0;
  blockSize: i32 = 0;
  prefixOn: i32 = 0; // 0: plain id pool (single-id managers, caching off)
  freeTop: i32 = 0; // ids on the free stack
  numUsed: i32 = 0; // ids held by anything other than the prefix cache
  numCached: i32 = 0; // prefix-cache entries (one block each)
  numEvictable: i32 = 0; // cached entries nothing else holds
  heapSize: i32 = 0; // entries in the side heap (see lru.ts)
  bucketMask: u32 = 0; // table buckets - 1 (power of two; see table.ts)
  tagMask: u32 = 0; // the bits of a table entry above the id's (table.ts)
  ringMask: u32 = 0; // recency ring capacity - 1 (power of two; see lru.ts)
  ringHead: u32 = 0; // position of the oldest ring entry (positions grow, wrapping at 2^32)
  ringTail: u32 = 0; // position the next entry is written to
  seed: u64 = 0;
  clock: u64 = 0; // LRU recency: each touch gets the next value (u32 stamps; see relabel in lru.ts)

  // Per-id state: a record of META_SIZE bytes per id (references, stamp,
  // fingerprint, side-heap position and the 16-byte hash: what eviction,
  // release and insert read together, one cache line; the records start on
  // a line), and a separate dense array for the flags, read in batches
  // whose misses overlap (prefix.ts, idpool.ts). refs, stamps, fps, heapPos
  // and hashes point at their field of id 0's record: field f of id i is at
  // f + (i << META_SHIFT). Random reads on
  // this machine cost ~20 ns in a 2-3 MB working set and 100+ ns past ~4 MB.
  refs: usize = 0; // i32 per record (per 4 bytes without caching, see refShift): every reference, the cache's included
  flags: usize = 0; // u8[numBlocks]: CACHED | STAMPED | ...
  stamps: usize = 0; // u32 per record: recency of a cached entry (caching on only; 0 otherwise)
  fps: usize = 0; // u32 per record: a cached entry's table fingerprint (eviction finds its slot without the hash; caching on only)
  hashes: usize = 0; // 16 bytes per record: the chain hash stamped on the block (caching on only)
  heapPos: usize = 0; // i32 per record: index + 1 in the side heap, 0 when absent (caching on only)
  keys: usize = 0; // u32[numBlocks]: policy key, lower evicted first (LFU: hits; priority); policies other than LRU only
  aux: usize = 0; // AUX_SIZE bytes per id: the priority policy's retention fields (that policy only)
  ring: usize = 0; // i32 id[ringMask + 1]: the recency ring (lru.ts; stamps implied by positions)
  free: usize = 0; // i32[numBlocks]: free stack, top = free[freeTop - 1]
  heap: usize = 0; // the side heap of returning entries by stamp (lru.ts): its top's slot, free's last; entry i is i32 slots below
  table: usize = 0; // (bucketMask + 1) buckets of 16 u32 lanes, 64-byte aligned (table.ts)
  arrays: usize = 0; // the region every array above lives in

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
  evMirror: usize = 0; // per id, what announced it (events.ts; allocated when recording with snapshots first starts)
  evSnapshots: i32 = 0; // 1 while the mirror is kept

  // Eviction policy (lru.ts): POLICY_LRU keeps the recency ring; the others
  // order entries by (key, stamp) (per-key lists and the side heap).
  policy: i32 = 0;
  // POLICY_PRIORITY (priority.ts): the pool's clock, the heap of retentions by
  // expiry, and the per-position keys the next insert gives the blocks it visits.
  now: f64 = 0;
  expHeap: usize = 0; // i32[numBlocks]
  expSize: i32 = 0;
  batch: usize = 0; // (f64 priority, f64 expiry)[numBlocks]
  // Policies other than LRU (lru.ts): per-id list links, list heads, tails, bitmap.
  links: usize = 0;
  // The references' stride as a shift: META_SHIFT in the records (caching
  // on), 2 in a dense array (caching off: no other per-id field to share a
  // line with, and 4 bytes where a record took 16).
  refShift: u32 = 0;
}

// Flag bits, error codes, cold fields and policies: bindings/core/abi.ts.
export const CACHED: u8 = <u8>FLAG_CACHED;
export const STAMPED: u8 = <u8>FLAG_STAMPED;
export const LINKED: u8 = <u8>FLAG_LINKED; // in the recency ring (its newest entry for the id is live)
export const TOLD: u8 = <u8>FLAG_TOLD; // announced in a stored event (events.ts)
export const LIVE: u8 = <u8>FLAG_LIVE; // a linear-state slot held live by a sequence (linear-state.ts)
export const PENDING: u8 = <u8>FLAG_PENDING; // a linear-state slot reserved for a checkpoint (linear-state.ts)
export const AUDIT_MARK: u8 = <u8>FLAG_AUDIT_MARK; // set and cleared within one audit (manager-exports.ts)
export const IN_HEAP: u8 = <u8>FLAG_IN_HEAP; // in the side heap (lru.ts); its position is in heapPos

// Error codes returned by exports (negative); the offending index is kept in
// `errorIndex` so the bindings can name the argument element.
export const ERR_UNSTAMPED_PARENT: i32 = E_UNSTAMPED_PARENT;
export const ERR_OUT_OF_RANGE: i32 = E_OUT_OF_RANGE;
export const ERR_PADDING: i32 = E_PADDING;
export const ERR_NOT_HELD: i32 = E_NOT_HELD;
export const ERR_FREE: i32 = E_FREE;
export const ERR_TOKENS_MISSING: i32 = E_TOKENS_MISSING;
export const ERR_EVENTS_ON: i32 = E_EVENTS_ON;

/** Index of the element an export rejected (read by the bindings for the message). */
export let errorIndex: i32 = -1;

export function setErrorIndex(i: i32): void {
  errorIndex = i;
}

/**
 * Why `id` was refused, given `last` = numBlocks - 1 of its manager: padding
 * (0), out of range, or else `inRange` (the check it failed in range). The
 * checks' loops only find the first bad id; this works out the code once.
 */
// @ts-ignore: decorator
@inline export function idError(id: i32, last: u32, inRange: i32): i32 {
  return id == 0 ? ERR_PADDING : <u32>(id - 1) >= last ? ERR_OUT_OF_RANGE : inRange;
}

// The per-id record (see Manager): its size as a shift, and its fields' offsets.
export const META_SIZE: usize = <usize>M_SIZE;
export const META_SHIFT: usize = <usize>M_SHIFT;
export const META_REFS: usize = <usize>M_REFS;
export const META_STAMP: usize = <usize>M_STAMP;
export const META_FP: usize = <usize>M_FP;
export const META_HEAP_POS: usize = <usize>M_HEAP_POS;
export const META_HASH: usize = <usize>M_HASH;
/** refShift of a manager without caching: its references are a dense i32 array. */
export const DENSE_REF_SHIFT: usize = 2;

// The priority policy's per-id fields (byte offsets in an AUX_SIZE-byte slot of m.aux).
export const AUX_SIZE: usize = <usize>A_SIZE;
export const AUX_EXPIRY: usize = <usize>A_EXPIRY;
export const AUX_EXP_POS: usize = <usize>A_EXP_POS;

/** Eviction policies (Manager.policy). */
export const POLICY_LRU: i32 = P_LRU;
export const POLICY_LFU: i32 = P_LFU;
export const POLICY_PRIORITY: i32 = P_PRIORITY;
/** The priority of a block nothing marked, and of one whose retention expired (TensorRT-LLM's). */
export const DEFAULT_PRIORITY: u32 = 35;

@inline export function aux(m: Manager, id: i32): usize {
  return m.aux + <usize>id * AUX_SIZE;
}

@inline export function keyOf(m: Manager, id: i32): u32 {
  return load<u32>(m.keys + (<usize>id << 2));
}

@inline export function setKey(m: Manager, id: i32, v: u32): void {
  store<u32>(m.keys + (<usize>id << 2), v);
}

@inline export function refOf(m: Manager, id: i32): i32 {
  return load<i32>(m.refs + (<usize>id << <usize>m.refShift));
}

@inline export function setRef(m: Manager, id: i32, v: i32): void {
  store<i32>(m.refs + (<usize>id << <usize>m.refShift), v);
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
  return m.hashes + (<usize>id << META_SHIFT);
}

@inline export function stampOf(m: Manager, id: i32): u32 {
  return load<u32>(m.stamps + (<usize>id << META_SHIFT));
}

@inline export function setStamp(m: Manager, id: i32, v: u32): void {
  store<u32>(m.stamps + (<usize>id << META_SHIFT), v);
}

/** Copies a 16-byte hash (two loads and stores; a bulk memory.copy costs a call into the engine). */
@inline export function copyHash(dst: usize, src: usize): void {
  store<u64>(dst, load<u64>(src));
  store<u64>(dst, load<u64>(src, 8), 8);
}
