// The eviction order of the prefix cache.
//
// The reference keeps one LRU list of every cached block and, on each
// eviction, walks it from the least recent end, skipping blocks a sequence
// still holds -- so every call rescans all held blocks ahead of the first
// victim. We keep the same order with a different bookkeeping:
//
// - A ring of ids in recency order. A touch (match, insert) gives the entry
//   the next stamp and appends its id; the entry it had goes stale where it
//   is. The ring's position and the clock advance together, so an entry's
//   stamp is implied by its position (position + ringOffset) and the ring
//   stores ids alone, 4 bytes each: an entry is live when its id is LINKED
//   and the id's stamp is still the one its position implies. Nothing is
//   unlinked, so a touch writes no neighbour, and eviction reads ids from
//   consecutive memory instead of chasing links through random records.
// - Held entries may stay in the ring. When the eviction walk meets one it
//   *parks* it: clears LINKED and moves on; it costs one step, once, instead
//   of one step per eviction call.
// - A parked entry whose last holder lets go goes into a small side heap
//   keyed by its stamp (it keeps the recency it had).
// - Eviction takes the older of the ring's oldest live entry and the
//   side-heap top.
// - When the ring is full, its live entries are packed together (at most
//   numBlocks - 1 of them in a ring of >= 2 * numBlocks), O(1) per touch
//   amortized, and given the stamps their new positions imply. Stamps only
//   grow by that, and every entry outside the ring (parked, or in the side
//   heap) was passed by the ring's head, so it stays older than every entry
//   in the ring.
//
// The victims and their order are exactly the reference's; each victim is
// O(1) from the ring (O(log n) from the side heap, which only holds blocks
// that were parked and then released).
//
// The other policies (Manager.policy != POLICY_LRU) order entries by
// (key, stamp): lower key first, equal keys by recency. A touch gives the
// newest stamp, so appending to a list per key keeps every list in stamp
// order, and the head of the lowest non-empty list is the least entry of all
// listed ones: each touch and each victim is O(1) (linked through per-id
// prev/next, KEY_LISTS lists, a bitmap of the non-empty ones). Entries that
// cannot be appended in order -- a key of KEY_LISTS or more, a key changed
// without a touch (a retention that ended), a parked entry released -- go to
// the side heap, now ordered by (key, stamp); eviction takes the lesser of
// the lowest list's head and the heap top, parking held ones as under LRU.

import {
  Manager, LINKED, IN_HEAP, CACHED, AUDIT_MARK, POLICY_LRU, META_SHIFT, META_REFS, META_STAMP, flagsOf, setFlags, stampOf, setStamp,
  refOf, keyOf, setKey,
} from "./layout";

/** True when `a` goes before `b`: older under LRU, else lower key then older. */
@inline function before(m: Manager, a: i32, b: i32): bool {
  if (m.policy != POLICY_LRU) {
    const ka = keyOf(m, a);
    const kb = keyOf(m, b);
    if (ka != kb) return ka < kb;
  }
  return stampOf(m, a) < stampOf(m, b);
}

@inline export function isLinked(m: Manager, id: i32): bool {
  return (flagsOf(m, id) & LINKED) != 0;
}

// ---- per-key lists (policies other than LRU) ----

/** Keys below this have a list; entries with larger keys live in the side heap. */
export const KEY_LISTS: u32 = 128;

/** Bytes of the lists' region for `numBlocks` ids: prev/next per id, heads, tails, the bitmap. */
export function listBytes(numBlocks: i32): usize {
  return (<usize>numBlocks << 3) + (<usize>KEY_LISTS << 3) + (<usize>KEY_LISTS >> 3);
}

@inline function linkAddr(m: Manager, id: i32): usize {
  return m.links + (<usize>id << 3); // i32 prev, i32 next
}

@inline function headAddr(m: Manager, k: u32): usize {
  return m.links + (<usize>m.numBlocks << 3) + (<usize>k << 2);
}

@inline function tailAddr(m: Manager, k: u32): usize {
  return headAddr(m, k) + (<usize>KEY_LISTS << 2);
}

@inline function bitsAddr(m: Manager, k: u32): usize {
  return headAddr(m, 0) + (<usize>KEY_LISTS << 3) + (<usize>(k >> 5) << 2);
}

/** Appends the entry (key < KEY_LISTS, newest stamp) to its key's list. */
@inline function listAppend(m: Manager, id: i32, k: u32): void {
  const tail = load<i32>(tailAddr(m, k));
  const l = linkAddr(m, id);
  store<i32>(l, tail);
  store<i32>(l, 0, 4);
  if (tail != 0) store<i32>(linkAddr(m, tail), id, 4);
  else {
    store<i32>(headAddr(m, k), id);
    const b = bitsAddr(m, k);
    store<u32>(b, load<u32>(b) | (<u32>1 << (k & 31)));
  }
  store<i32>(tailAddr(m, k), id);
  setFlags(m, id, flagsOf(m, id) | LINKED);
}

/** Takes a listed entry out of its key's list (its key must not have changed since it was appended). */
@inline function listUnlink(m: Manager, id: i32): void {
  const k = keyOf(m, id);
  const l = linkAddr(m, id);
  const prev = load<i32>(l);
  const next = load<i32>(l, 4);
  if (prev != 0) store<i32>(linkAddr(m, prev), next, 4);
  else {
    store<i32>(headAddr(m, k), next);
    if (next == 0) {
      const b = bitsAddr(m, k);
      store<u32>(b, load<u32>(b) & ~(<u32>1 << (k & 31)));
    }
  }
  if (next != 0) store<i32>(linkAddr(m, next), prev);
  else store<i32>(tailAddr(m, k), prev);
  setFlags(m, id, flagsOf(m, id) & ~LINKED);
}

/** The head of the lowest non-empty list, or 0. */
@inline function listFront(m: Manager): i32 {
  for (let w: u32 = 0; w < (KEY_LISTS >> 5); w++) {
    const bits = load<u32>(bitsAddr(m, w << 5));
    if (bits != 0) return load<i32>(headAddr(m, (w << 5) + ctz(bits)));
  }
  return 0;
}

// ---- the recency ring ----

@inline function ringAt(m: Manager, pos: u32): usize {
  return m.ring + (<usize>(pos & m.ringMask) << 2);
}

/**
 * Stamp of ring position p, minus p: the newest entry (at ringTail - 1) has
 * the clock's stamp. Wraps with the u32 positions.
 */
@inline function ringOffset(m: Manager): u32 {
  return <u32>m.clock + 1 - m.ringTail;
}

@inline function liveAt(m: Manager, pos: u32, offset: u32): bool {
  const id = load<i32>(ringAt(m, pos));
  return (flagsOf(m, id) & LINKED) != 0 && stampOf(m, id) == pos + offset;
}

/**
 * Packs the live entries at the start of the ring, keeping their order, and
 * gives them the stamps their new positions imply (each one grows or stays).
 */
function compactRing(m: Manager): void {
  const offset = ringOffset(m);
  let w = m.ringHead;
  for (let r = m.ringHead; r != m.ringTail; r++) {
    if (!liveAt(m, r, offset)) continue;
    if (w != r) store<i32>(ringAt(m, w), load<i32>(ringAt(m, r)));
    w++;
  }
  m.ringTail = w;
  restampRing(m);
}

/** Gives every ring entry (all live, after a packing) the stamp its position implies. */
function restampRing(m: Manager): void {
  const offset = ringOffset(m);
  for (let r = m.ringHead; r != m.ringTail; r++) setStamp(m, load<i32>(ringAt(m, r)), r + offset);
}

/** The entry leaves the recency order (its ring entry goes stale, or it leaves its key's list). */
@inline function unlink(m: Manager, id: i32): void {
  if (m.policy == POLICY_LRU) setFlags(m, id, flagsOf(m, id) & ~LINKED);
  else listUnlink(m, id);
}

/**
 * Gives the entry the newest stamp and appends it to the ring. The room is
 * made first: packing restamps the ring from the clock, which must not yet
 * count this entry.
 */
@inline function appendNewest(m: Manager, id: i32): void {
  if (m.clock >= <u64>0xffffffff) relabel(m);
  if (m.ringTail - m.ringHead > m.ringMask) compactRing(m);
  setStamp(m, id, <u32>++m.clock);
  store<i32>(ringAt(m, m.ringTail++), id);
  setFlags(m, id, flagsOf(m, id) | LINKED);
}

/** The oldest live ring entry's id (stale entries before it are dropped), or 0. */
@inline function ringFront(m: Manager): i32 {
  const offset = ringOffset(m);
  while (m.ringHead != m.ringTail) {
    if (liveAt(m, m.ringHead, offset)) return load<i32>(ringAt(m, m.ringHead));
    m.ringHead++;
  }
  return 0;
}

// ---- side heap (min by stamp) ----

// The heap shares the free stack's array, growing down from its last slot:
// a free id and an id in the heap (cached, evictable) are never the same, so
// freeTop + heapSize <= numBlocks - 1 and the two never meet.
@inline function heapAt(m: Manager, i: i32): i32 {
  return load<i32>(m.heap - (<usize>i << 2));
}

@inline function place(m: Manager, i: i32, id: i32): void {
  store<i32>(m.heap - (<usize>i << 2), id);
  store<i32>(m.heapPos + (<usize>id << META_SHIFT), i + 1);
}

// The flag answers "in the heap?" from the flag bytes; the position is only
// read when the entry is there.
@inline export function inHeap(m: Manager, id: i32): bool {
  return (flagsOf(m, id) & IN_HEAP) != 0;
}

/** Puts an entry that is in neither the ring nor the heap into the heap. */
function heapPush(m: Manager, id: i32): void {
  setFlags(m, id, flagsOf(m, id) | IN_HEAP);
  siftUp(m, m.heapSize++, id);
}

// Stamps are unique, so "not before" is "after" in every comparison below.
function siftUp(m: Manager, i: i32, id: i32): void {
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const p = heapAt(m, parent);
    if (!before(m, id, p)) break;
    place(m, i, p);
    i = parent;
  }
  place(m, i, id);
}

function siftDown(m: Manager, i: i32, id: i32): void {
  const n = m.heapSize;
  while (true) {
    let child = 2 * i + 1;
    if (child >= n) break;
    let c = heapAt(m, child);
    if (child + 1 < n) {
      const c2 = heapAt(m, child + 1);
      if (before(m, c2, c)) {
        child++;
        c = c2;
      }
    }
    if (!before(m, c, id)) break;
    place(m, i, c);
    i = child;
  }
  place(m, i, id);
}

function heapRemove(m: Manager, id: i32): void {
  const posAddr = m.heapPos + (<usize>id << META_SHIFT);
  const i = load<i32>(posAddr) - 1;
  store<i32>(posAddr, 0);
  setFlags(m, id, flagsOf(m, id) & ~IN_HEAP);
  const last = heapAt(m, --m.heapSize);
  if (last == id) return;
  if (i > 0 && before(m, last, heapAt(m, (i - 1) >> 1))) siftUp(m, i, last);
  else siftDown(m, i, last);
}

// ---- recency stamps ----
//
// Stamps are u32 (ring positions are); the clock counts touches. Before it
// would pass 2^32 - 1, every cached entry is renumbered 1..k in stamp order:
// only the order of stamps matters (ring, side heap, parked entries), and a
// renumbering that keeps it leaves both structures valid. It runs once per
// ~4 billion touches, in O(k log k).

/** The next stamp, renumbering first when the u32 range is used up. */
@inline function nextStamp(m: Manager): u32 {
  if (m.clock >= <u64>0xffffffff) relabel(m);
  return <u32>++m.clock;
}

@inline function idAt(base: usize, i: i32): i32 {
  return load<i32>(base + (<usize>i << 2));
}

function siftIds(m: Manager, base: usize, i: i32, n: i32): void {
  const id = idAt(base, i);
  const s = stampOf(m, id);
  while (true) {
    let c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && stampOf(m, idAt(base, c + 1)) > stampOf(m, idAt(base, c))) c++;
    const cid = idAt(base, c);
    if (stampOf(m, cid) <= s) break;
    store<i32>(base + (<usize>i << 2), cid);
    i = c;
  }
  store<i32>(base + (<usize>i << 2), id);
}

/** Reverses ring slots [i, j). */
function reverseSlots(m: Manager, i: u32, j: u32): void {
  while (j > i + 1) {
    j--;
    const a = m.ring + (<usize>i << 2);
    const b = m.ring + (<usize>j << 2);
    const t = load<i32>(a);
    store<i32>(a, load<i32>(b));
    store<i32>(b, t);
    i++;
  }
}

/** Turns the ring's slots left by `h`: slot h comes first. */
function rotateRing(m: Manager, h: u32): void {
  const cap = m.ringMask + 1;
  reverseSlots(m, 0, h);
  reverseSlots(m, h, cap);
  reverseSlots(m, 0, cap);
}

/** Moves the clock forward to `v` (a test hook's way to the wrap-around); the ring's entries get the stamps their positions then imply. */
export function moveClock(m: Manager, v: u32): void {
  if (<u64>v <= m.clock) return;
  if (m.ring != 0) compactRing(m);
  m.clock = <u64>v;
  if (m.ring != 0) restampRing(m);
}

/**
 * Renumbers the stamps of every cached entry, keeping their order: the
 * entries out of the ring 1..k, the ring's r entries k + 1..k + r.
 */
export function relabel(m: Manager): void {
  // Stale ring entries would imply stamps that renumbered ones could meet
  // again: drop them first. The packed entries (at most numBlocks - 1) are
  // then turned to the ring's start, and the rest of the ring (at least
  // numBlocks + 1 entries) is the scratch for the other cached ids.
  compactRing(m);
  const r = m.ringTail - m.ringHead;
  rotateRing(m, m.ringHead & m.ringMask);
  m.ringHead = 0;
  m.ringTail = r;
  const base = m.ring + (<usize>r << 2);
  // Under LRU a LINKED entry is in the ring; other policies keep no ring,
  // and their listed entries are renumbered with the rest.
  const skip: u8 = m.policy == POLICY_LRU ? LINKED : 0;
  let k = 0;
  for (let id = 1; id < m.numBlocks; id++) {
    const f = flagsOf(m, id);
    if ((f & CACHED) == 0 || (f & skip) != 0) continue;
    store<i32>(base + (<usize>k << 2), id);
    k++;
  }
  // Heapsort by stamp, ascending, in place.
  for (let i = (k >> 1) - 1; i >= 0; i--) siftIds(m, base, i, k);
  for (let end = k - 1; end > 0; end--) {
    const top = idAt(base, 0);
    store<i32>(base, idAt(base, end));
    store<i32>(base + (<usize>end << 2), top);
    siftIds(m, base, 0, end);
  }
  for (let i = 0; i < k; i++) setStamp(m, idAt(base, i), <u32>(i + 1));
  // The ring after them all: every entry out of it is older (parked and
  // side-heap entries were passed by the ring's head), but for one a touch
  // is about to restamp (unlinked, or cached a moment ago), whose place
  // here does not matter.
  m.clock = <u64>(k + r);
  restampRing(m);
}

// ---- the operations the cache uses ----

/** Gives the entry the newest recency (a match or insert visited it). */
@inline export function touch(m: Manager, id: i32): void {
  if (isLinked(m, id)) unlink(m, id);
  else if (inHeap(m, id)) heapRemove(m, id);
  if (m.policy == POLICY_LRU) appendNewest(m, id);
  else {
    setStamp(m, id, nextStamp(m));
    placeKeyed(m, id);
  }
}

/** Under a keyed policy, an entry with the newest stamp goes to its key's list (the side heap past KEY_LISTS). */
@inline function placeKeyed(m: Manager, id: i32): void {
  const k = keyOf(m, id);
  if (k < KEY_LISTS) listAppend(m, id, k);
  else heapPush(m, id);
}

/** touch() of ids[n - 1], ..., ids[0] (0 = none): ids[0] ends the most recent. */
export function touchAll(m: Manager, ids: usize, n: i32): void {
  if (m.policy == POLICY_LRU && roomFor(m, n)) {
    touchAllLru(m, ids, n);
    return;
  }
  // Other policies, and a batch longer than the ring's room (one listing
  // entries many times over): one touch at a time.
  for (let b = n - 1; b >= 0; b--) {
    const id = load<i32>(ids + (<usize>b << 2));
    if (id != 0) touch(m, id);
  }
}

/** Makes room for `n` more stamps and ring entries (renumbering, packing); false when the ring cannot hold them. */
function roomFor(m: Manager, n: i32): bool {
  if (<u64>m.clock + <u64>n >= <u64>0xffffffff) relabel(m);
  if (m.ringTail - m.ringHead + <u32>n > m.ringMask + 1) compactRing(m);
  return m.ringTail - m.ringHead + <u32>n <= m.ringMask + 1 && <u64>m.clock + <u64>n < <u64>0xffffffff;
}

/**
 * touchAll under LRU with room made: the LRU case of touch() inlined, the
 * ring's tail and the clock in locals. A linked entry needs no unlink (its
 * old ring entry goes stale when the stamp changes).
 */
function touchAllLru(m: Manager, ids: usize, n: i32): void {
  const ring = m.ring;
  const mask = m.ringMask;
  const flags = m.flags;
  const stamps = m.stamps;
  let tail = m.ringTail;
  let clock = <u32>m.clock;
  for (let b = n - 1; b >= 0; b--) {
    const id = load<i32>(ids + (<usize>b << 2));
    if (id == 0) continue;
    if ((load<u8>(flags + <usize>id) & IN_HEAP) != 0) heapRemove(m, id);
    clock++;
    store<u32>(stamps + (<usize>id << META_SHIFT), clock);
    store<i32>(ring + (<usize>(tail & mask) << 2), id);
    tail++;
    store<u8>(flags + <usize>id, load<u8>(flags + <usize>id) | LINKED);
  }
  m.ringTail = tail;
  m.clock = <u64>clock;
}

/**
 * Gives the entry the key `k`, keeping its stamp: an entry in the order moves
 * to the side heap (its stamp is not the newest any more); one out of it
 * (parked) stays out.
 */
export function rekey(m: Manager, id: i32, k: u32): void {
  const ordered = isLinked(m, id) || inHeap(m, id);
  lruRemove(m, id);
  setKey(m, id, k);
  if (ordered) heapPush(m, id);
}

/** A new entry (its stamp is set by the touch that follows in the same batch). */
export function lruAdd(m: Manager, id: i32): void {
  if (m.policy == POLICY_LRU) appendNewest(m, id);
  else {
    setStamp(m, id, nextStamp(m));
    setKey(m, id, 0);
    listAppend(m, id, 0);
  }
}

/** The last holder besides the cache let go (`f`: the id's flags): a parked entry becomes findable again. */
@inline export function becameEvictable(m: Manager, id: i32, f: u8): void {
  if ((f & (LINKED | IN_HEAP)) == 0) heapPush(m, id);
}

/** Removes an entry being evicted (or dropped) from whichever structure holds it. */
@inline export function lruRemove(m: Manager, id: i32): void {
  if (isLinked(m, id)) unlink(m, id);
  else if (inHeap(m, id)) heapRemove(m, id);
}

/**
 * The least recent evictable entry, or 0 when there is none. Held entries met
 * on the way are parked (taken out of the order until they are released).
 * The caller evicts the entry returned (lruRemove first).
 */
export function nextVictim(m: Manager): i32 {
  const lru = m.policy == POLICY_LRU;
  while (true) {
    const a = lru ? ringFront(m) : listFront(m);
    const b = m.heapSize > 0 ? heapAt(m, 0) : 0;
    if (a == 0 && b == 0) return 0;
    const fromOrder = b == 0 || (a != 0 && before(m, a, b));
    const id = fromOrder ? a : b;
    if (fromOrder) {
      // Either way the front entry is used up: the victim leaves the order
      // (evict() unlinks it next) or a held entry is parked.
      if (lru) m.ringHead++;
      if (refOf(m, id) == 1) return id;
      unlink(m, id);
    } else {
      if (refOf(m, id) == 1) return id;
      heapRemove(m, id);
    }
  }
}

/**
 * nextVictim + lruRemove for up to `k` victims, written to out[0..), when
 * the policy is LRU and the side heap is empty (so every victim comes from
 * the ring, and parking cannot fill the heap): one pass over consecutive
 * ring entries with the fields in locals. Returns the number taken.
 */
export function takeFromRing(m: Manager, k: i32, out: usize): i32 {
  const ring = m.ring;
  const mask = m.ringMask;
  const tail = m.ringTail;
  const flags = m.flags;
  // The references and the stamp are on one record (caching is on here):
  // one base for both, so that the loop's locals fit in registers.
  const refs = m.refs;
  const offset = ringOffset(m);
  let head = m.ringHead;
  let n = 0;
  while (n < k && head != tail) {
    const id = load<i32>(ring + (<usize>(head & mask) << 2));
    const stamp = head + offset;
    head++;
    const fa = flags + <usize>id;
    const f = load<u8>(fa);
    const rec = refs + (<usize>id << META_SHIFT);
    if ((f & LINKED) == 0 || load<u32>(rec, META_STAMP - META_REFS) != stamp) continue; // stale
    store<u8>(fa, f & ~LINKED); // a victim leaves the order; a held entry is parked
    if (load<i32>(rec) != 1) continue;
    store<i32>(out + (<usize>n << 2), id);
    n++;
  }
  m.ringHead = head;
  return n;
}

/**
 * Audit of the per-key lists: each is linked both ways, in stamp order, holds
 * only LINKED entries of its key, and the bitmap marks exactly the non-empty
 * ones. Returns the number of listed entries, or -1.
 */
function listAudit(m: Manager): i32 {
  let count = 0;
  for (let k: u32 = 0; k < KEY_LISTS; k++) {
    const head = load<i32>(headAddr(m, k));
    if (((load<u32>(bitsAddr(m, k)) >> (k & 31)) & 1) != (head != 0 ? 1 : 0)) return -1;
    let prev = 0;
    let lastStamp: u32 = 0;
    for (let id = head; id != 0; id = load<i32>(linkAddr(m, id), 4)) {
      if (id < 0 || id >= m.numBlocks || count >= m.numBlocks) return -1;
      if (!isLinked(m, id) || keyOf(m, id) != k || load<i32>(linkAddr(m, id)) != prev) return -1;
      if (prev != 0 && stampOf(m, id) <= lastStamp) return -1;
      lastStamp = stampOf(m, id);
      prev = id;
      count++;
    }
    if (load<i32>(tailAddr(m, k)) != prev) return -1;
  }
  return count;
}

/**
 * Audit: the ring's live entries (the per-key lists' entries under other
 * policies) are sorted by stamp, one per LINKED id; the side heap is ordered
 * and indexed. Returns the number of entries in the ring
 * and the heap, or -1. Uses the audit mark on the ring's ids.
 */
export function lruAudit(m: Manager): i32 {
  let count = 0;
  let lastStamp: u32 = 0;
  if (m.ring != 0) {
    if (m.ringTail - m.ringHead > m.ringMask + 1) return -1;
    const offset = ringOffset(m);
    for (let r = m.ringHead; r != m.ringTail; r++) {
      const id = load<i32>(ringAt(m, r));
      if (id <= 0 || id >= m.numBlocks) return -1;
      if (!liveAt(m, r, offset)) continue;
      const f = flagsOf(m, id);
      if ((f & AUDIT_MARK) != 0) return -1; // two live entries for one id
      setFlags(m, id, f | AUDIT_MARK);
      const s = stampOf(m, id);
      if (count > 0 && s <= lastStamp) return -1;
      lastStamp = s;
      count++;
    }
  }
  if (m.policy != POLICY_LRU) {
    if (count != 0) return -1;
    count = listAudit(m);
    if (count < 0) return -1;
  }
  // Under LRU every cached entry out of the ring is older than the ring's
  // head (relabel relies on it).
  const lru = m.policy == POLICY_LRU && m.ring != 0;
  // In u64: with the clock at 2^32 - 1 and the ring empty it is 2^32.
  const headStamp: u64 = m.clock + 1 - <u64>(m.ringTail - m.ringHead);
  let linked = 0;
  for (let id = 1; id < m.numBlocks; id++) {
    if (isLinked(m, id)) linked++;
    else if (lru && (flagsOf(m, id) & CACHED) != 0 && <u64>stampOf(m, id) >= headStamp) return -1;
  }
  if (linked != count) return -1;
  for (let i = 0; i < m.heapSize; i++) {
    const h = heapAt(m, i);
    if (h <= 0 || h >= m.numBlocks || isLinked(m, h) || !inHeap(m, h)) return -1;
    if (load<i32>(m.heapPos + (<usize>h << META_SHIFT)) != i + 1) return -1;
    if (i > 0 && before(m, h, heapAt(m, (i - 1) >> 1))) return -1;
  }
  return count + m.heapSize;
}
