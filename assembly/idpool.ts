// Ids and their holders: the free stack, reference counts and the exact
// "used" count. An id goes back to the free stack only when its last
// reference goes (deallocate is not free); a block counts as used while
// anything other than the prefix cache holds it.

import {
  Manager, CACHED, POLICY_LRU, POLICY_PRIORITY, META_SHIFT, DENSE_REF_SHIFT, refOf, setRef, flagsOf, setFlags, isCached,
  ERR_NOT_HELD, ERR_FREE, setErrorIndex, idError,
} from "./layout";
import { becameEvictable, lruRemove, nextVictim, takeFromRing } from "./lru";
import { tableRemoveAll, readHomesOf } from "./table";
import { expDrop } from "./priority";
import { recordRemoved, recordCleared } from "./events";

/** Keeps evict()'s prefetch loads alive (never read). */
let evictSink: u32 = 0;

/** Victims evict() takes from the recency ring per round of its passes. */
const EVICT_CHUNK: i32 = 64;

/**
 * The table's side of an eviction of the `n` victims at `ids` (their
 * events recorded, under 'priority' their expiries dropped, in order).
 */
function removeVictims(m: Manager, ids: usize, n: i32): void {
  // The home buckets first, with no branch on their content: the reads are
  // independent, so their cache misses overlap; inside a removal's probe
  // loop they came one per victim.
  evictSink += readHomesOf(m, ids, n);
  if (m.eventsOn != 0 || m.policy == POLICY_PRIORITY) {
    for (let i = 0; i < n; i++) {
      const id = load<i32>(ids + (<usize>i << 2));
      if (m.eventsOn != 0) recordRemoved(m, id);
      if (m.policy == POLICY_PRIORITY) expDrop(m, id);
    }
  }
  tableRemoveAll(m, ids, n);
}

@inline export function pushFree(m: Manager, id: i32): void {
  store<i32>(m.free + (<usize>m.freeTop << 2), id);
  m.freeTop++;
}

@inline function popFree(m: Manager): i32 {
  m.freeTop--;
  return load<i32>(m.free + (<usize>m.freeTop << 2));
}

/** Fills the stack so that ids pop 0, 1, 2, ... and takes id 0 as padding. */
export function initIds(m: Manager): void {
  const n = m.numBlocks;
  for (let i = 0; i < n; i++) store<i32>(m.free + (<usize>i << 2), n - 1 - i);
  m.freeTop = n;
  const padding = popFree(m);
  setRef(m, padding, 1); // held by the manager for its whole life
}

/**
 * Evicts up to `k` least recent evictable entries; their ids are pushed on the
 * free stack in eviction order. Returns how many were evicted. A caller that
 * pops every victim at once when the stack then holds at least `popAt` ids
 * (popIds writes each one's state) passes that height: the victims' state
 * is then left for it to write, else cleared here.
 */
export function evict(m: Manager, k: i32, popAt: i32 = I32.MAX_VALUE): i32 {
  // Three passes: take the victims out of the recency order (consecutive
  // ring entries), read each victim's home table slot, then remove them
  // from the table (removeVictims). Each structure still sees the victims
  // in eviction order.
  const top = m.freeTop;
  const first = m.free + (<usize>top << 2);
  let done = 0;
  if (m.policy == POLICY_LRU && m.heapSize == 0) {
    // A chunk of victims at a time: their records and buckets, read by one
    // pass, are still in the first-level cache for the next (a whole
    // sequence's victims at once outgrew it between the passes).
    while (done < k) {
      const want = k - done < EVICT_CHUNK ? k - done : EVICT_CHUNK;
      const at = first + (<usize>done << 2);
      const got = takeFromRing(m, want, at);
      removeVictims(m, at, got);
      done += got;
      if (got < want) break;
    }
    m.freeTop += done;
  } else {
    while (done < k) {
      const id = nextVictim(m);
      if (id == 0) break;
      lruRemove(m, id);
      pushFree(m, id);
      done++;
    }
    removeVictims(m, first, done);
  }
  if (m.freeTop < popAt) {
    // Eviction is for caching managers: their references are on the records.
    const flags = m.flags;
    const refs = m.refs;
    for (let i = 0; i < done; i++) {
      const id = load<i32>(first + (<usize>i << 2));
      store<u8>(flags + <usize>id, 0);
      store<i32>(refs + (<usize>id << META_SHIFT), 0);
    }
  }
  m.numCached -= done;
  m.numEvictable -= done;
  m.blocksEvicted += <u64>done;
  return done;
}

/**
 * Pops `n` ids into `out` (one reference each). When the stack is short and
 * caching is on, evicts first; evictions stay done even if the allocation
 * then fails. Returns n, or -1 when there are not enough blocks.
 */
export function allocate(m: Manager, n: i32, out: usize): i32 {
  if (n > m.freeTop) {
    if (m.prefixOn != 0) evict(m, n - m.freeTop, n);
    if (n > m.freeTop) {
      m.allocFailures++;
      return -1;
    }
  }
  if (m.refShift == <u32>META_SHIFT) popIds(m, n, out, META_SHIFT);
  else popIds(m, n, out, DENSE_REF_SHIFT);
  m.freeTop -= n;
  m.numUsed += n;
  if (m.numUsed > m.peakUsed) m.peakUsed = m.numUsed;
  m.blocksAllocated += <u64>n;
  return n;
}

/** Pops `n` ids to `out`, one reference each, the references `rs` bits apart (a constant: see release). */
// @ts-ignore: decorator
@inline function popIds(m: Manager, n: i32, out: usize, rs: usize): void {
  const free = m.free;
  const refs = m.refs;
  const flags = m.flags;
  let top = m.freeTop;
  for (let i = 0; i < n; i++) {
    const id = load<i32>(free + (<usize>--top << 2));
    store<i32>(refs + (<usize>id << rs), 1);
    store<u8>(flags + <usize>id, 0);
    store<i32>(out + (<usize>i << 2), id);
  }
}

/**
 * `k` allocations of one id each, exactly as `k` calls of allocate(m, 1, ...)
 * in a row make them (a run of decode steps that each need a block): ids
 * popped while the free stack lasts, then one victim per step, in eviction
 * order (a step evicts one and pops it; evicting the rest at once takes the
 * same victims in the same order, as nothing happens between the steps).
 * Stops at the first step that finds no id, counted as a failure as that
 * call's would be. Writes the ids to `out` in step order; returns how many.
 */
export function allocateSteps(m: Manager, k: i32, out: usize): i32 {
  if (k <= 0) return 0;
  const popped = k < m.freeTop ? k : m.freeTop;
  let done = popped;
  if (popped > 0) allocate(m, popped, out);
  if (done < k && m.prefixOn != 0) {
    // The stack is empty: the victims go to free[0, got), the first at the
    // bottom. Reversed, allocate() pops them in eviction order.
    const got = evict(m, k - done, 0);
    const free = m.free;
    for (let i = 0, j = got - 1; i < j; i++, j--) {
      const a = free + (<usize>i << 2);
      const b = free + (<usize>j << 2);
      const t = load<i32>(a);
      store<i32>(a, load<i32>(b));
      store<i32>(b, t);
    }
    if (got > 0) allocate(m, got, out + (<usize>done << 2));
    done += got;
  }
  if (done < k) m.allocFailures++;
  return done;
}

@inline function holders(m: Manager, id: i32): i32 {
  return refOf(m, id) - <i32>(flagsOf(m, id) & CACHED);
}

/** One more holder on a held or cached id (a cached id stops being evictable). */
@inline export function addRef(m: Manager, id: i32): void {
  if (holders(m, id) == 0) {
    if (++m.numUsed > m.peakUsed) m.peakUsed = m.numUsed;
    if (isCached(m, id)) m.numEvictable--;
  }
  setRef(m, id, refOf(m, id) + 1);
}

/** One holder lets go: the id becomes evictable, or free when nothing holds it. */
@inline export function dropRef(m: Manager, id: i32): void {
  const r = refOf(m, id) - 1;
  setRef(m, id, r);
  afterDrop(m, id, r);
}

/** What a dropped reference leaves `id` with `r` references does. */
@inline function afterDrop(m: Manager, id: i32, r: i32): void {
  if (r == 0) {
    m.numUsed--;
    setFlags(m, id, 0);
    pushFree(m, id);
  } else if (r == 1 && isCached(m, id)) {
    m.numUsed--;
    m.numEvictable++;
    becameEvictable(m, id, flagsOf(m, id));
  }
}

/** 0 for an id in range, else its code. */
@inline function rangeError(m: Manager, id: i32): i32 {
  return idError(id, <u32>(m.numBlocks - 1), 0);
}

/** Why an in-range id with `r` references and flags `f` cannot lose a holder (0 when it can). */
@inline function holderError(r: i32, f: u8): i32 {
  if (r - <i32>(f & CACHED) > 0) return 0;
  return r == 0 ? ERR_FREE : ERR_NOT_HELD;
}

/**
 * Drops one reference per listed id, in list order. Validates the whole list
 * first (duplicates included) and changes nothing when some id has no holder
 * left. Returns 0, or an error code with `errorIndex` set.
 */
export function release(m: Manager, ids: usize, n: i32): i32 {
  // The record stride as a constant in each copy: a variable shift ties up
  // a register the loops need.
  return m.refShift == <u32>META_SHIFT ? releaseStrided(m, ids, n, META_SHIFT) : releaseStrided(m, ids, n, DENSE_REF_SHIFT);
}

/** release() with the references `rs` bits apart (m.refShift). */
// @ts-ignore: decorator
@inline function releaseStrided(m: Manager, ids: usize, n: i32, rs: usize): i32 {
  // The common case, distinct ids (a sequence's table): one pass validates,
  // takes each reference and marks the id by storing its new count as ~count
  // (negative); one pass unmarks and applies the effects in list order. An id
  // met marked is listed twice: the marks are undone and the general path
  // below runs. Header fields and array bases sit in locals: a store to
  // linear memory could alias them as far as the compilers know.
  const refs = m.refs;
  const flags = m.flags;
  // One unsigned compare for the range (0 and negatives wrap past it); the
  // loop only stops at a bad or marked id, and what it was is worked out after.
  const last = <u32>(m.numBlocks - 1);
  let i = 0;
  for (; i < n; i++) {
    const id = load<i32>(ids + (<usize>i << 2));
    if (<u32>(id - 1) >= last) break;
    const ra = refs + (<usize>id << rs);
    const r = load<i32>(ra);
    // A marked id (r < 0) stops here too: r - (0 or 1) <= 0.
    if (r - <i32>(load<u8>(flags + <usize>id) & CACHED) <= 0) break;
    store<i32>(ra, ~(r - 1));
  }
  let code = 0;
  if (i < n) {
    const id = load<i32>(ids + (<usize>i << 2));
    code = idError(id, last, 0);
    if (code == 0) {
      const r = load<i32>(refs + (<usize>id << rs));
      if (r >= 0) code = holderError(r, load<u8>(flags + <usize>id));
    }
  }
  if (i == n) {
    applyDrops(m, ids, n, rs, true);
    return 0;
  }
  for (let j = 0; j < i; j++) {
    const id = load<i32>(ids + (<usize>j << 2));
    setRef(m, id, ~refOf(m, id) + 1);
  }
  if (code != 0) {
    setErrorIndex(i);
    return code;
  }
  return releaseListedTwice(m, ids, n);
}

/**
 * release() of ids the caller knows to be in range, distinct and each held
 * by someone other than the cache (it allocated them, or checked them and
 * picked them by their count): no validation pass.
 */
export function releaseHeldOnce(m: Manager, ids: usize, n: i32): void {
  if (m.refShift == <u32>META_SHIFT) applyDrops(m, ids, n, META_SHIFT, false);
  else applyDrops(m, ids, n, DENSE_REF_SHIFT, false);
}

/**
 * The effects of one reference dropped per listed id, in list order, the
 * references `rs` bits apart. `marked`: release's first pass stored each
 * id's new count as ~count; else the reference is taken here.
 */
// @ts-ignore: decorator
@inline function applyDrops(m: Manager, ids: usize, n: i32, rs: usize, marked: bool): void {
  const refs = m.refs;
  const flags = m.flags;
  const free = m.free;
  let top = m.freeTop;
  let used = 0;
  let evictable = 0;
  for (let j = 0; j < n; j++) {
    const id = load<i32>(ids + (<usize>j << 2));
    const ra = refs + (<usize>id << rs);
    const r = marked ? ~load<i32>(ra) : load<i32>(ra) - 1;
    store<i32>(ra, r);
    if (r == 0) {
      used++;
      store<u8>(flags + <usize>id, 0);
      store<i32>(free + (<usize>top << 2), id);
      top++;
    } else if (r == 1) {
      const f = load<u8>(flags + <usize>id);
      if ((f & CACHED) != 0) {
        used++;
        evictable++;
        becameEvictable(m, id, f);
      }
    }
  }
  m.freeTop = top;
  m.numUsed -= used;
  m.numEvictable += evictable;
}

/** release() of a list that names some id more than once. */
function releaseListedTwice(m: Manager, ids: usize, n: i32): i32 {
  // Validation: take the references tentatively, then put them all back.
  let bad = -1;
  let code = 0;
  for (let i = 0; i < n; i++) {
    const id = load<i32>(ids + (<usize>i << 2));
    code = rangeError(m, id);
    if (code == 0) code = holderError(refOf(m, id), flagsOf(m, id));
    if (code != 0) {
      bad = i;
      break;
    }
    setRef(m, id, refOf(m, id) - 1);
  }
  const undo = bad >= 0 ? bad : n;
  for (let i = 0; i < undo; i++) {
    const id = load<i32>(ids + (<usize>i << 2));
    setRef(m, id, refOf(m, id) + 1);
  }
  if (bad >= 0) {
    setErrorIndex(bad);
    return code;
  }
  for (let i = 0; i < n; i++) dropRef(m, load<i32>(ids + (<usize>i << 2)));
  return 0;
}

/**
 * 0 when every listed id is in range and referenced (held or cached); else
 * the code for the first one that is not (ERR_FREE in range), errorIndex set.
 */
export function checkReferenced(m: Manager, ids: usize, n: i32): i32 {
  // The header's fields in locals: read once, not once per id. One unsigned
  // compare for the range (0 and negatives wrap past it).
  const last = <u32>(m.numBlocks - 1);
  const refs = m.refs;
  const refShift = <usize>m.refShift;
  let bad = 0;
  for (; bad < n; bad++) {
    const id = load<i32>(ids + (<usize>bad << 2));
    if (<u32>(id - 1) >= last || load<i32>(refs + (<usize>id << refShift)) == 0) break;
  }
  if (bad == n) return 0;
  setErrorIndex(bad);
  return idError(load<i32>(ids + (<usize>bad << 2)), last, ERR_FREE);
}

/** Adds one reference per listed id; every id must be held or cached. */
export function retain(m: Manager, ids: usize, n: i32): i32 {
  const code = checkReferenced(m, ids, n);
  if (code != 0) return code;
  for (let i = 0; i < n; i++) addRef(m, load<i32>(ids + (<usize>i << 2)));
  return 0;
}

/** Removes every evictable entry (the reference's reset_prefix_cache). */
export function evictAll(m: Manager): i32 {
  // Everything goes: one "all cleared" event instead of a removal per block.
  const on = m.eventsOn;
  if (on == 0 || m.numCached != m.numEvictable) return evict(m, m.numEvictable);
  m.eventsOn = 0;
  const n = evict(m, m.numEvictable);
  m.eventsOn = on;
  recordCleared(m);
  return n;
}
