// Exports of the block manager core. `m` is a manager's header pointer.

import { alloc, release as releaseRegion } from "./heap";
import {
  Manager, AUX_SIZE, AUDIT_MARK, CACHED, STAMPED, TOLD, IN_HEAP, POLICY_LRU, POLICY_PRIORITY, refOf, flagsOf, setFlags, hashPtr, copyHash, stampOf, errorIndex, setErrorIndex,
} from "./layout";
import { initIds, allocate, release, retain, evict, evictAll } from "./idpool";
import { match, insert, touchReversed } from "./prefix";
import { isLinked, inHeap, lruAudit } from "./lru";
import { tableCount } from "./table";
import { resetBatch, advanceTime, expAudit } from "./priority";
import { setRecording, clearEvents } from "./events";

@inline function align16(n: usize): usize {
  return (n + 15) & ~(<usize>15);
}

/**
 * Creates a manager of `numBlocks` ids (id 0 taken as padding) and returns its
 * header pointer, or 0 when linear memory is exhausted. Grows memory.
 */
export function mgr_create(numBlocks: i32, blockSize: i32, prefixOn: i32, seedLo: u32, seedHi: u32): usize {
  if (numBlocks < 2 || blockSize < 1) return 0;
  const n = <usize>numBlocks;
  // Sizes in u64 so a huge request is refused instead of wrapping around.
  const n64 = <u64>numBlocks;
  let cap: u64 = 16;
  while (cap < n64 * 2) cap <<= 1;
  const header = align16(offsetof<Manager>());
  // refs, flags and the free stack; with caching also stamps, hashes, the
  // cold fields, the side heap, the recency ring (cap entries) and the table.
  let size64: u64 = <u64>header + (n64 * 4 + 16) + (n64 + 16) + (n64 * 4 + 16);
  if (prefixOn != 0) size64 += 2 * (n64 * 4 + 16) + n64 * 16 + (n64 * <u64>AUX_SIZE + 16) + (n64 * 4 + 16) + cap * 8 + cap * 8;
  if (size64 >= 0xffff0000) return 0;
  const base = alloc(<usize>size64);
  if (base == 0) return 0;
  const m = changetype<Manager>(base);
  m.numBlocks = numBlocks;
  m.blockSize = blockSize;
  m.prefixOn = prefixOn;
  m.seed = (<u64>seedHi << 32) | <u64>seedLo;
  let p = base + header;
  m.refs = p; p += align16(n * 4);
  m.flags = p; p += align16(n);
  m.free = p; p += align16(n * 4);
  if (prefixOn != 0) {
    m.stamps = p; p += align16(n * 4);
    m.fps = p; p += align16(n * 4);
    m.hashes = p; p += n * 16;
    m.aux = p; p += align16(n * AUX_SIZE);
    m.heap = p; p += align16(n * 4);
    m.ring = p; p += <usize>cap * 8;
    m.ringMask = <u32>(cap - 1);
    m.table = p;
    m.tableMask = <i32>(cap - 1);
  }
  initIds(m);
  return base;
}

/**
 * Chooses the eviction policy (POLICY_* in layout.ts) of a manager with
 * caching on and an empty cache. Returns 0, or -1 when it cannot.
 */
export function mgr_set_policy(m: usize, policy: i32): i32 {
  const mg = changetype<Manager>(m);
  if (mg.prefixOn == 0 || mg.numCached != 0 || policy < POLICY_LRU || policy > POLICY_PRIORITY) return -1;
  if (policy == POLICY_PRIORITY && mg.batch == 0) {
    // Grows memory: the expiry heap and the batch keys (priority.ts).
    const n = <usize>mg.numBlocks;
    const exp = alloc(n * 4);
    const batch = exp != 0 ? alloc(n * 16) : 0;
    if (batch == 0) {
      releaseRegion(exp);
      return -2;
    }
    mg.expHeap = exp;
    mg.batch = batch;
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

export function mgr_policy(m: usize): i32 {
  return changetype<Manager>(m).policy;
}

export function mgr_destroy(m: usize): void {
  releaseRegion(changetype<Manager>(m).events);
  releaseRegion(changetype<Manager>(m).expHeap);
  releaseRegion(changetype<Manager>(m).batch);
  releaseRegion(m);
}

/** Turns event recording on (1) or off (0). */
export function mgr_events_record(m: usize, on: i32): void {
  setRecording(changetype<Manager>(m), on != 0);
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

export function mgr_insert(m: usize, tokens: usize, ids: usize, nBlocks: i32, parentId: i32, parentPtr: usize, known: i32): i32 {
  return insert(changetype<Manager>(m), tokens, ids, nBlocks, parentId, parentPtr, known);
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

/** Where the per-id reference counts are (i32 each), for read-only views. */
export function mgr_refs_ptr(m: usize): usize {
  return changetype<Manager>(m).refs;
}

/** Where the per-id recency stamps are (u32 each; 0 without caching). */
export function mgr_stamps_ptr(m: usize): usize {
  return changetype<Manager>(m).stamps;
}

/** Where the per-id flag bytes are (CACHED = 1, ... in layout.ts). */
export function mgr_flags_ptr(m: usize): usize {
  return changetype<Manager>(m).flags;
}

/** Where the cold per-id fields are (AUX_* in layout.ts; 0 without caching). */
export function mgr_aux_ptr(m: usize): usize {
  return changetype<Manager>(m).aux;
}

/** Test hook: moves the recency clock (u32 stamps) so that tests reach its wrap-around. */
export function mgr_set_clock(m: usize, v: u32): void {
  const mg = changetype<Manager>(m);
  if (<u64>v > mg.clock) mg.clock = <u64>v;
}

export function mgr_free_ptr(m: usize): usize {
  return changetype<Manager>(m).free;
}

export function mgr_error_index(): i32 {
  return errorIndex;
}

/** Writes the counters as f64: see STAT_FIELDS in bindings/core/manager-exports.ts. */
export function mgr_stats(m: usize, out: usize): void {
  const mg = changetype<Manager>(m);
  store<f64>(out, <f64>mg.freeTop);
  store<f64>(out, <f64>mg.numUsed, 8);
  store<f64>(out, <f64>mg.numCached, 16);
  store<f64>(out, <f64>(mg.numBlocks - 1), 24);
  store<f64>(out, <f64>mg.numEvictable, 32);
  store<f64>(out, <f64>mg.matchCalls, 40);
  store<f64>(out, <f64>mg.blocksQueried, 48);
  store<f64>(out, <f64>mg.blocksHit, 56);
  store<f64>(out, <f64>mg.blocksInserted, 64);
  store<f64>(out, <f64>mg.blocksEvicted, 72);
  store<f64>(out, <f64>mg.blocksAllocated, 80);
  store<f64>(out, <f64>mg.allocFailures, 88);
  store<f64>(out, <f64>mg.peakUsed, 96);
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
  if (m.freeTop < 0 || m.freeTop > n - 1) return fail(-10, -1);
  if (refOf(m, 0) != 1 || (flagsOf(m, 0) & ~AUDIT_MARK) != 0) return fail(-15, 0);
  for (let i = 0; i < m.freeTop; i++) {
    const id = load<i32>(m.free + (<usize>i << 2));
    if (id <= 0 || id >= n) return fail(-11, id);
    const f = flagsOf(m, id);
    if ((f & AUDIT_MARK) != 0) return fail(-12, id);
    if (refOf(m, id) != 0 || (f & CACHED) != 0) return fail(-13, id);
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
    if (r <= 0) return fail(-14, id);
    const c = <i32>(f & CACHED);
    if ((f & TOLD) != 0 && c == 0) return fail(-24, id);
    if (c != 0) {
      if (m.prefixOn == 0) return fail(-23, id);
      cached++;
      if (stampOf(m, id) > m.clock) return fail(-22, id);
    }
    if (r - c > 0) used++;
    if (c != 0 && r == 1) {
      evictable++;
      if (!isLinked(m, id) && !inHeap(m, id)) return fail(-21, id);
    }
    if (c == 0 && m.prefixOn != 0 && (isLinked(m, id) || inHeap(m, id))) return fail(-21, id);
  }
  if (used != m.numUsed) return fail(-16, -1);
  if (cached != m.numCached) return fail(-17, -1);
  if (m.prefixOn != 0) {
    if (tableCount(m) != cached) return fail(-18, -1);
    if (evictable != m.numEvictable) return fail(-20, -1);
    if (inHeapFlags != m.heapSize) return fail(-21, -1);
    const ordered = lruAudit(m);
    if (ordered < evictable) return fail(-20, -1);
    if (m.policy == POLICY_PRIORITY && expAudit(m) != 0) return fail(-25, -1);
  }
  return 0;
}


