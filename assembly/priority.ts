// Priority eviction with retention (POLICY_PRIORITY), as TensorRT-LLM does it.
//
// An insert gives each block it visits a priority (0-100, lower evicted
// first) and the time its retention ends; the bindings stage both per batch
// position in `m.batch` just before the insert, and the insert puts the
// defaults back, so an unmarked insert gives DEFAULT_PRIORITY forever. The
// eviction heap (lru.ts) orders entries by (priority, stamp). Time is the
// caller's clock (`m.now`, moved by advanceTime), never the wall clock: when
// it passes a retention's end the block falls back to DEFAULT_PRIORITY. A
// second heap, by expiry, finds those blocks in O(log n) each.

import { Manager, AUX_EXPIRY, AUX_EXP_POS, DEFAULT_PRIORITY, aux, setKey } from "./layout";
import { lruRemove, rekey } from "./lru";

@inline function expiryOf(m: Manager, id: i32): f64 {
  return load<f64>(aux(m, id) + AUX_EXPIRY);
}

@inline function expAt(m: Manager, i: i32): i32 {
  return load<i32>(m.expHeap + (<usize>i << 2));
}

@inline function expPlace(m: Manager, i: i32, id: i32): void {
  store<i32>(m.expHeap + (<usize>i << 2), id);
  store<i32>(aux(m, id) + AUX_EXP_POS, i + 1);
}

@inline export function inExpHeap(m: Manager, id: i32): bool {
  return load<i32>(aux(m, id) + AUX_EXP_POS) != 0;
}

function expUp(m: Manager, i: i32, id: i32): void {
  const e = expiryOf(m, id);
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const p = expAt(m, parent);
    if (expiryOf(m, p) <= e) break;
    expPlace(m, i, p);
    i = parent;
  }
  expPlace(m, i, id);
}

function expDown(m: Manager, i: i32, id: i32): void {
  const e = expiryOf(m, id);
  const n = m.expSize;
  while (true) {
    let child = 2 * i + 1;
    if (child >= n) break;
    let c = expAt(m, child);
    if (child + 1 < n && expiryOf(m, expAt(m, child + 1)) < expiryOf(m, c)) c = expAt(m, ++child);
    if (e <= expiryOf(m, c)) break;
    expPlace(m, i, c);
    i = child;
  }
  expPlace(m, i, id);
}

/** Forgets an entry's retention (it is evicted or re-keyed). */
@inline export function expDrop(m: Manager, id: i32): void {
  // Mostly nothing has a retention that ends: no call, no read of the id's fields.
  if (m.expSize != 0) expRemove(m, id);
}

function expRemove(m: Manager, id: i32): void {
  const posAddr = aux(m, id) + AUX_EXP_POS;
  const i = load<i32>(posAddr) - 1;
  if (i < 0) return;
  store<i32>(posAddr, 0);
  const last = expAt(m, --m.expSize);
  if (last == id) return;
  if (i > 0 && expiryOf(m, last) < expiryOf(m, expAt(m, (i - 1) >> 1))) expUp(m, i, last);
  else expDown(m, i, last);
}

/**
 * Stages one retention for the next insert: (priority, expiry) at batch
 * positions [from, to), the default at the others of [0, n); clamped to the
 * batch's numBlocks positions.
 */
export function stageRange(m: Manager, n: i32, from: i32, to: i32, priority: f64, expiry: f64): void {
  const lim = n < 0 ? 0 : n < m.numBlocks ? n : m.numBlocks;
  const a = from < 0 ? 0 : from < lim ? from : lim;
  const z = to < a ? a : to < lim ? to : lim;
  const dflt = f64x2(<f64>DEFAULT_PRIORITY, Infinity);
  const kept = f64x2.replace_lane(f64x2.splat(priority), 1, expiry);
  const batch = m.batch;
  for (let b = 0; b < a; b++) v128.store(batch + (<usize>b << 4), dflt);
  for (let b = a; b < z; b++) v128.store(batch + (<usize>b << 4), kept);
  for (let b = z; b < lim; b++) v128.store(batch + (<usize>b << 4), dflt);
}

/** Writes the default (priority, expiry) into batch positions [0, n). */
export function resetBatch(m: Manager, n: i32): void {
  for (let b = 0; b < n; b++) {
    const p = m.batch + (<usize>b << 4);
    store<f64>(p, <f64>DEFAULT_PRIORITY);
    store<f64>(p, Infinity, 8);
  }
}

/**
 * Gives each visited entry ids[b] (0 = none) the priority and expiry staged
 * at batch position b, then restores the defaults there. Entries leave the
 * eviction heap first (their key changes); the touch that follows puts them back.
 */
export function applyBatch(m: Manager, ids: usize, n: i32): void {
  const lim = n < m.numBlocks ? n : m.numBlocks;
  for (let b = 0; b < n; b++) {
    const id = load<i32>(ids + (<usize>b << 2));
    if (id == 0) continue;
    let prio: f64 = <f64>DEFAULT_PRIORITY;
    let expiry: f64 = Infinity;
    if (b < lim) {
      const p = m.batch + (<usize>b << 4);
      prio = load<f64>(p);
      expiry = load<f64>(p, 8);
    }
    lruRemove(m, id);
    expDrop(m, id);
    if (expiry <= m.now) prio = <f64>DEFAULT_PRIORITY;
    setKey(m, id, <u32>prio);
    // Only the expiry heap's entries have their expiry read: an entry that
    // stays out of it is not written (a random write per visited block).
    if (<u32>prio != DEFAULT_PRIORITY && expiry != Infinity) {
      store<f64>(aux(m, id) + AUX_EXPIRY, expiry);
      expUp(m, m.expSize++, id);
    }
  }
  resetBatch(m, lim);
}

/** Moves the clock to `t` (>= now): every retention that ended falls back to the default priority. */
export function advanceTime(m: Manager, t: f64): void {
  m.now = t;
  while (m.expSize > 0) {
    const id = expAt(m, 0);
    if (expiryOf(m, id) > t) break;
    expDrop(m, id);
    rekey(m, id, DEFAULT_PRIORITY);
  }
}

/** Audit: the expiry heap is ordered, indexed and holds only unexpired entries. Returns 0 or -1. */
export function expAudit(m: Manager): i32 {
  for (let i = 0; i < m.expSize; i++) {
    const id = expAt(m, i);
    if (id <= 0 || id >= m.numBlocks || load<i32>(aux(m, id) + AUX_EXP_POS) != i + 1) return -1;
    if (expiryOf(m, id) <= m.now) return -1;
    if (i > 0 && expiryOf(m, expAt(m, (i - 1) >> 1)) > expiryOf(m, id)) return -1;
  }
  return 0;
}
