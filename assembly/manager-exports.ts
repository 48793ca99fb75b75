// Exports of the block manager core. `m` is a manager's header pointer.

import { alloc, release as releaseRegion } from "./heap";
import { slotNew, slotPublish, slotFree, slotValid } from "./handles";
import {
  SLOT_SIZE, MAGIC_MANAGER, MAGIC_LINEAR_STATE, MAX_REGION_BYTES,
  STAT_FREE, STAT_USED, STAT_CACHED, STAT_TOTAL, STAT_EVICTABLE, STAT_MATCH_CALLS, STAT_BLOCKS_QUERIED, STAT_BLOCKS_HIT,
  STAT_BLOCKS_INSERTED, STAT_BLOCKS_EVICTED, STAT_BLOCKS_ALLOCATED, STAT_ALLOCATION_FAILURES, STAT_PEAK_USED,
  CHECK_FREE_SIZE, CHECK_FREE_RANGE, CHECK_FREE_TWICE, CHECK_FREE_HELD, CHECK_LOST, CHECK_PADDING, CHECK_USED, CHECK_CACHED,
  CHECK_TABLE, CHECK_HEADER, CHECK_ORDER, CHECK_ORDER_MEMBERS, CHECK_FUTURE, CHECK_NO_CACHE, CHECK_TOLD, CHECK_RETENTION,
} from "../bindings/core/abi";
import {
  Manager, AUX_SIZE, META_SIZE, META_SHIFT, META_REFS, META_STAMP, META_FP, META_HEAP_POS, META_HASH, DENSE_REF_SHIFT, AUDIT_MARK, CACHED, STAMPED, TOLD, IN_HEAP, POLICY_LRU, POLICY_PRIORITY, refOf, flagsOf, setFlags, hashPtr, copyHash, stampOf, errorIndex, setErrorIndex,
} from "./layout";
import { initIds, allocate, allocateSteps, release, retain, evict, evictAll } from "./idpool";
import { match, insert, touchReversed, stampChain } from "./prefix";
import { isLinked, inHeap, lruAudit, listBytes, moveClock } from "./lru";
import { tableCount } from "./table";
import { resetBatch, advanceTime, expAudit, stageRange } from "./priority";
import { setRecording, clearEvents, rewindEvents, snapshotEvents } from "./events";

@inline function align16(n: usize): usize {
  return (n + 15) & ~(<usize>15);
}

/**
 * Bytes of the arrays of a manager of `numBlocks` ids (u64: a huge request is
 * measured, not wrapped). The per-id records (references; with caching also
 * the stamp, fingerprint, side-heap position and hash they have room for),
 * aligned to a cache line, flags and the free stack (the side heap shares
 * its array); with caching also the recency ring (`tableCap(numBlocks)` ids
 * of 4 bytes) and the table (as many u32 lanes, in 64-byte buckets).
 */
function arrayBytes(numBlocks: i32, prefixOn: i32): u64 {
  const n = <u64>numBlocks;
  let size: u64 = 48 + (n * (prefixOn != 0 ? <u64>META_SIZE : 4) + 16) + (n + 16) + (n * 4 + 16);
  if (prefixOn != 0) {
    const cap = tableCap(numBlocks);
    size += cap * 4 + (cap * 4 + 64);
  }
  return size;
}

/** Entries of the hash table and of the recency ring: a power of two >= 2 * numBlocks. */
function tableCap(numBlocks: i32): u64 {
  let cap: u64 = 16;
  while (cap < <u64>numBlocks * 2) cap <<= 1;
  return cap;
}

/**
 * Bytes of linear memory a manager of `numBlocks` ids takes (arrays and its
 * header slot; an eviction policy other than LRU and recorded events take
 * more), so that a caller can refuse a set of managers that cannot fit
 * before creating any of them. An f64: sums of many stay exact.
 */
export function mgr_region_bytes(numBlocks: i32, prefixOn: i32): f64 {
  if (numBlocks < 1) return 0;
  return <f64>(arrayBytes(numBlocks, prefixOn) + <u64>SLOT_SIZE + 16);
}

/**
 * Creates a manager of `numBlocks` ids (id 0 taken as padding) and returns its
 * header pointer, or 0 when linear memory is exhausted. Grows memory.
 */
export function mgr_create(numBlocks: i32, blockSize: i32, prefixOn: i32, seedLo: u32, seedHi: u32): usize {
  return createManager(numBlocks, blockSize, prefixOn, seedLo, seedHi, <u32>MAGIC_MANAGER);
}

/** mgr_create for a manager of kind `magic` (a linear-state cache is one too). */
export function createManager(numBlocks: i32, blockSize: i32, prefixOn: i32, seedLo: u32, seedHi: u32, magic: u32): usize {
  if (numBlocks < 1 || blockSize < 1) return 0;
  const bytes = arrayBytes(numBlocks, prefixOn);
  if (bytes > <u64>MAX_REGION_BYTES) return 0;
  const slot = slotNew();
  if (slot == 0) return 0;
  const base = alloc(<usize>bytes);
  if (base == 0) {
    slotFree(slot);
    return 0;
  }
  const n = <usize>numBlocks;
  const m = changetype<Manager>(slot);
  m.arrays = base;
  m.numBlocks = numBlocks;
  m.blockSize = blockSize;
  m.prefixOn = prefixOn;
  m.seed = (<u64>seedHi << 32) | <u64>seedLo;
  let p = (base + 63) & ~(<usize>63);
  if (prefixOn != 0) {
    // One record per id; each field's base is its offset in id 0's record.
    m.refs = p + META_REFS;
    m.stamps = p + META_STAMP;
    m.fps = p + META_FP;
    m.heapPos = p + META_HEAP_POS;
    m.hashes = p + META_HASH;
    m.refShift = <u32>META_SHIFT;
    p += n << META_SHIFT;
  } else {
    // Only references: a dense array (a composite's sub-managers allocate and release in bulk).
    m.refs = p;
    m.refShift = <u32>DENSE_REF_SHIFT;
    p += align16(n * 4);
  }
  m.flags = p; p += align16(n);
  m.free = p; p += align16(n * 4);
  m.heap = m.free + ((n - 1) << 2);
  if (prefixOn != 0) {
    const cap = <usize>tableCap(numBlocks);
    m.ring = p; p += cap * 4;
    m.ringMask = <u32>(cap - 1);
    m.table = (p + 63) & ~(<usize>63);
    m.bucketMask = <u32>(cap / 16 - 1);
    // Ids need the bits of numBlocks - 1; the fingerprint's bits above them tag an entry.
    const idBits = numBlocks > 1 ? 32 - clz<u32>(<u32>(numBlocks - 1)) : 1;
    m.tagMask = ~((<u32>1 << <u32>idBits) - 1);
  }
  initIds(m);
  slotPublish(slot, magic);
  return slot;
}

/**
 * Chooses the eviction policy (POLICY_* in layout.ts) of a manager with
 * caching on and an empty cache. Returns 0, or -1 when it cannot.
 */
export function mgr_set_policy(m: usize, policy: i32): i32 {
  const mg = changetype<Manager>(m);
  if (mg.prefixOn == 0 || mg.numCached != 0 || policy < POLICY_LRU || policy > POLICY_PRIORITY) return -1;
  if (policy != POLICY_LRU && mg.links == 0) {
    // Grows memory: the keys and the per-key lists (lru.ts).
    const keys = alloc(<usize>mg.numBlocks << 2);
    const links = keys != 0 ? alloc(listBytes(mg.numBlocks)) : 0;
    if (links == 0) {
      releaseRegion(keys);
      return -2;
    }
    mg.keys = keys;
    mg.links = links;
  }
  if (policy == POLICY_PRIORITY && mg.batch == 0) {
    // Grows memory: the expiry heap and the batch keys (priority.ts).
    const n = <usize>mg.numBlocks;
    const exp = alloc(n * 4);
    const batch = exp != 0 ? alloc(n * 16) : 0;
    const aux = batch != 0 ? alloc(n * AUX_SIZE) : 0;
    if (aux == 0) {
      releaseRegion(exp);
      releaseRegion(batch);
      return -2;
    }
    mg.expHeap = exp;
    mg.batch = batch;
    mg.aux = aux;
    resetBatch(mg, mg.numBlocks);
  }
  mg.policy = policy;
  return 0;
}

/** Moves the priority policy's clock to `t`; -1 (nothing changed) when t is before the current time or NaN. */
export function mgr_set_time(m: usize, t: f64): i32 {
  const mg = changetype<Manager>(m);
  if (!(t >= mg.now)) return -1;
  if (mg.policy == POLICY_PRIORITY) advanceTime(mg, t);
  else mg.now = t;
  return 0;
}

export function mgr_time(m: usize): f64 {
  return changetype<Manager>(m).now;
}

/** Where the next insert's (f64 priority, f64 expiry) per batch position are staged (0 unless POLICY_PRIORITY). */
export function mgr_batch_ptr(m: usize): usize {
  return changetype<Manager>(m).batch;
}

/** Stages one retention for the next insert's first `n` blocks: (priority, expiry) on [from, to), the default elsewhere (stageRange in priority.ts; nothing unless POLICY_PRIORITY). */
export function mgr_stage_retention(m: usize, n: i32, from: i32, to: i32, priority: f64, expiry: f64): void {
  const mg = changetype<Manager>(m);
  if (mg.batch != 0) stageRange(mg, n, from, to, priority, expiry);
}

export function mgr_policy(m: usize): i32 {
  return changetype<Manager>(m).policy;
}

/** Ends a manager: its slot stops naming it at once, then its regions go back. */
export function mgr_destroy(m: usize): void {
  const mg = changetype<Manager>(m);
  const events = mg.events;
  const mirror = mg.evMirror;
  const expHeap = mg.expHeap;
  const batch = mg.batch;
  const links = mg.links;
  const keys = mg.keys;
  const aux = mg.aux;
  const arrays = mg.arrays;
  slotFree(m);
  releaseRegion(links);
  releaseRegion(keys);
  releaseRegion(aux);
  releaseRegion(events);
  releaseRegion(mirror);
  releaseRegion(expHeap);
  releaseRegion(batch);
  releaseRegion(arrays);
}

/** 1 when `m` is the header of a live manager (`magic`: its kind) of generation `gen`. */
export function obj_valid(m: usize, gen: u32, magic: u32): i32 {
  return slotValid(m, gen, magic);
}

/**
 * Turns event recording on (1) or off (0); `snapshots` 1 keeps what each
 * stored event said, for snapshots (taken when recording starts). -1 when
 * memory for it ran out (nothing changed).
 */
export function mgr_events_record(m: usize, on: i32, snapshots: i32): i32 {
  return setRecording(changetype<Manager>(m), on != 0, snapshots != 0);
}

/** Appends stored records that rebuild the announced cache (parents first); bytes appended, or -1. */
export function mgr_events_snapshot(m: usize): i32 {
  return snapshotEvents(changetype<Manager>(m));
}

/** Keeps only the first `len` bytes of records. */
export function mgr_events_rewind(m: usize, len: i32): void {
  rewindEvents(changetype<Manager>(m), len);
}

/** Where the recorded events are (valid until the next call that records). */
export function mgr_events_ptr(m: usize): usize {
  return changetype<Manager>(m).events;
}

/** Bytes of recorded events; -1 when some were lost (memory exhausted). */
export function mgr_events_len(m: usize): i32 {
  const mg = changetype<Manager>(m);
  return mg.eventsLost != 0 ? -1 : mg.eventsLen;
}

export function mgr_events_clear(m: usize): void {
  clearEvents(changetype<Manager>(m));
}

export function mgr_allocate(m: usize, n: i32, out: usize): i32 {
  return allocate(changetype<Manager>(m), n, out);
}

/** allocateSteps: `k` one-id allocations in a row, stopping at the first that fails; returns how many were made. */
export function mgr_allocate_steps(m: usize, k: i32, out: usize): i32 {
  return allocateSteps(changetype<Manager>(m), k, out);
}

export function mgr_release(m: usize, ids: usize, n: i32): i32 {
  return release(changetype<Manager>(m), ids, n);
}

export function mgr_retain(m: usize, ids: usize, n: i32): i32 {
  return retain(changetype<Manager>(m), ids, n);
}

export function mgr_match(m: usize, tokens: usize, nBlocks: i32, parentId: i32, parentPtr: usize, out: usize, flags: i32, queried: i32): i32 {
  return match(changetype<Manager>(m), tokens, nBlocks, parentId, parentPtr, out, flags, queried);
}

/** The deferred LRU update of a match made in windows (ids of every window's hits). */
export function mgr_touch_reversed(m: usize, ids: usize, n: i32): void {
  touchReversed(changetype<Manager>(m), ids, n);
}

export function mgr_insert(m: usize, tokens: usize, ids: usize, nBlocks: i32, parentId: i32, parentPtr: usize, known: i32, staged: i32): i32 {
  return insert(changetype<Manager>(m), tokens, ids, nBlocks, parentId, parentPtr, known, staged);
}

/** Stamps the chain hashes of staged tokens on held ids (stampChain in prefix.ts). */
export function mgr_stamp_chain(m: usize, tokens: usize, ids: usize, nBlocks: i32, parentId: i32, parentPtr: usize): i32 {
  return stampChain(changetype<Manager>(m), tokens, ids, nBlocks, parentId, parentPtr);
}

export function mgr_evict(m: usize, k: i32): i32 {
  return evict(changetype<Manager>(m), k);
}

export function mgr_evict_all(m: usize): i32 {
  return evictAll(changetype<Manager>(m));
}

export function mgr_num_free(m: usize): i32 {
  return changetype<Manager>(m).freeTop;
}

export function mgr_num_used(m: usize): i32 {
  return changetype<Manager>(m).numUsed;
}

export function mgr_num_cached(m: usize): i32 {
  return changetype<Manager>(m).numCached;
}

export function mgr_ref(m: usize, id: i32): i32 {
  return refOf(changetype<Manager>(m), id);
}

/** Copies the hash stamped on `id` to `out`; returns 0 when it has none. */
export function mgr_block_hash(m: usize, id: i32, out: usize): i32 {
  const mg = changetype<Manager>(m);
  if (mg.prefixOn == 0 || (flagsOf(mg, id) & STAMPED) == 0) return 0;
  copyHash(out, hashPtr(mg, id));
  return 1;
}

/** Where id 0's reference count is (an i32 every mgr_refs_stride bytes), for read-only views. */
export function mgr_refs_ptr(m: usize): usize {
  return changetype<Manager>(m).refs;
}

/** Bytes from one id's reference count to the next one's: META_SIZE with caching on, 4 without. */
export function mgr_refs_stride(m: usize): u32 {
  return <u32>1 << changetype<Manager>(m).refShift;
}

/** Where id 0's recency stamp is (a u32 every META_SIZE bytes; 0 without caching). */
export function mgr_stamps_ptr(m: usize): usize {
  return changetype<Manager>(m).stamps;
}

/** Where the per-id flag bytes are (CACHED = 1, ... in layout.ts). */
export function mgr_flags_ptr(m: usize): usize {
  return changetype<Manager>(m).flags;
}

/** Where the priority policy's per-id fields are (AUX_* in bindings/core/abi.ts; 0 under other policies). */
export function mgr_aux_ptr(m: usize): usize {
  return changetype<Manager>(m).aux;
}

/** Where the per-id policy keys are (u32 each; 0 under LRU, which has none). */
export function mgr_keys_ptr(m: usize): usize {
  return changetype<Manager>(m).keys;
}

/** Test hook: moves the recency clock (u32 stamps) so that tests reach its wrap-around. */
export function mgr_set_clock(m: usize, v: u32): void {
  moveClock(changetype<Manager>(m), v);
}

/** Writes numBlocks, blockSize, prefixOn, seed low and high halves (i32 each) to `out`: what an attaching thread reads instead of trusting a descriptor. */
export function mgr_info(m: usize, out: usize): void {
  const mg = changetype<Manager>(m);
  store<i32>(out, mg.numBlocks);
  store<i32>(out, mg.blockSize, 4);
  store<i32>(out, mg.prefixOn, 8);
  store<u32>(out, <u32>mg.seed, 12);
  store<u32>(out, <u32>(mg.seed >> 32), 16);
}

export function mgr_free_ptr(m: usize): usize {
  return changetype<Manager>(m).free;
}

export function mgr_error_index(): i32 {
  return errorIndex;
}

/** Writes the counters as f64, STAT_COUNT of them in STAT_* order (bindings/core/abi.ts). */
export function mgr_stats(m: usize, out: usize): void {
  const mg = changetype<Manager>(m);
  stat(out, STAT_FREE, <f64>mg.freeTop);
  stat(out, STAT_USED, <f64>mg.numUsed);
  stat(out, STAT_CACHED, <f64>mg.numCached);
  stat(out, STAT_TOTAL, <f64>(mg.numBlocks - 1));
  stat(out, STAT_EVICTABLE, <f64>mg.numEvictable);
  stat(out, STAT_MATCH_CALLS, <f64>mg.matchCalls);
  stat(out, STAT_BLOCKS_QUERIED, <f64>mg.blocksQueried);
  stat(out, STAT_BLOCKS_HIT, <f64>mg.blocksHit);
  stat(out, STAT_BLOCKS_INSERTED, <f64>mg.blocksInserted);
  stat(out, STAT_BLOCKS_EVICTED, <f64>mg.blocksEvicted);
  stat(out, STAT_BLOCKS_ALLOCATED, <f64>mg.blocksAllocated);
  stat(out, STAT_ALLOCATION_FAILURES, <f64>mg.allocFailures);
  stat(out, STAT_PEAK_USED, <f64>mg.peakUsed);
}

@inline function stat(out: usize, i: i32, v: f64): void {
  store<f64>(out + (<usize>i << 3), v);
}

/**
 * Full-state audit. Returns 0, or a negative code naming the broken
 * invariant (see CHECK_MESSAGES in the bindings) with `errorIndex` = the id.
 */
export function mgr_check(m: usize): i32 {
  const mg = changetype<Manager>(m);
  const code = audit(mg);
  // Clear audit marks whatever the outcome.
  for (let id = 0; id < mg.numBlocks; id++) setFlags(mg, id, flagsOf(mg, id) & ~AUDIT_MARK);
  return code;
}

function fail(code: i32, id: i32): i32 {
  setErrorIndex(id);
  return code;
}

function audit(m: Manager): i32 {
  const n = m.numBlocks;
  if ((m.magic != <u32>MAGIC_MANAGER && m.magic != <u32>MAGIC_LINEAR_STATE) || m.gen == 0 || n < 1 || m.arrays == 0) return fail(CHECK_HEADER, -1);
  if (m.freeTop < 0 || m.freeTop > n - 1) return fail(CHECK_FREE_SIZE, -1);
  if (refOf(m, 0) != 1 || (flagsOf(m, 0) & ~AUDIT_MARK) != 0) return fail(CHECK_PADDING, 0);
  for (let i = 0; i < m.freeTop; i++) {
    const id = load<i32>(m.free + (<usize>i << 2));
    if (id <= 0 || id >= n) return fail(CHECK_FREE_RANGE, id);
    const f = flagsOf(m, id);
    if ((f & AUDIT_MARK) != 0) return fail(CHECK_FREE_TWICE, id);
    if (refOf(m, id) != 0 || (f & CACHED) != 0) return fail(CHECK_FREE_HELD, id);
    setFlags(m, id, f | AUDIT_MARK);
  }
  let used = 0;
  let cached = 0;
  let evictable = 0;
  let inHeapFlags = 0;
  for (let id = 1; id < n; id++) {
    const f = flagsOf(m, id);
    if ((f & IN_HEAP) != 0) inHeapFlags++;
    const r = refOf(m, id);
    if ((f & AUDIT_MARK) != 0) continue; // on the free stack
    if (r <= 0) return fail(CHECK_LOST, id);
    const c = <i32>(f & CACHED);
    if ((f & TOLD) != 0 && c == 0) return fail(CHECK_TOLD, id);
    if (c != 0) {
      if (m.prefixOn == 0) return fail(CHECK_NO_CACHE, id);
      cached++;
      if (stampOf(m, id) > m.clock) return fail(CHECK_FUTURE, id);
    }
    if (r - c > 0) used++;
    if (c != 0 && r == 1) {
      evictable++;
      if (!isLinked(m, id) && !inHeap(m, id)) return fail(CHECK_ORDER_MEMBERS, id);
    }
    if (c == 0 && m.prefixOn != 0 && (isLinked(m, id) || inHeap(m, id))) return fail(CHECK_ORDER_MEMBERS, id);
  }
  if (used != m.numUsed) return fail(CHECK_USED, -1);
  if (cached != m.numCached) return fail(CHECK_CACHED, -1);
  if (m.prefixOn != 0) {
    if (tableCount(m) != cached) return fail(CHECK_TABLE, -1);
    if (evictable != m.numEvictable) return fail(CHECK_ORDER, -1);
    if (inHeapFlags != m.heapSize) return fail(CHECK_ORDER_MEMBERS, -1);
    const ordered = lruAudit(m);
    if (ordered < evictable) return fail(CHECK_ORDER, -1);
    if (m.policy == POLICY_PRIORITY && expAudit(m) != 0) return fail(CHECK_RETENTION, -1);
  }
  return 0;
}


