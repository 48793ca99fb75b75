// The linear-state prefix cache (recurrent-state checkpoint slots, docs/linear-state.md).
//
// It is a manager of the id pool (idpool.ts) with block size 1 and caching on,
// so the free stack, the hash table and the LRU with parking are the KV
// cache's own machinery: a committed checkpoint is a cached id, a restore pin
// is one more reference on it (a pinned entry is held, so eviction skips it,
// exactly like a KV block a sequence holds). What the KV cache lacks are the
// two holder kinds of a slot that is not a checkpoint yet, kept as flags:
//
//   free       on the free stack, ref 0
//   live       ref 1, LIVE           (a running sequence's state; never evicted)
//   pending    ref 1, PENDING        (reserved; its hash is stamped, not in the table)
//   committed  ref 1 + pins, CACHED  (in the table and the LRU)
//
// ensure-free-slot is idpool's allocate: with no free slot it evicts the one
// least recent unpinned checkpoint, at most one per call (docs/linear-state.md, slots).

import {
  Manager, CACHED, STAMPED, flagsOf, setFlags, refOf, hashPtr, copyHash, setErrorIndex,
  LIVE, PENDING,
} from "./layout";
import { allocate, addRef, dropRef } from "./idpool";
import { sideScratch } from "./prefix";
import { ERR_OUT_OF_RANGE, LS_ERR_STATE as E_STATE, CHECK_SLOT_STATE } from "../bindings/core/abi";
import { lruAdd, touch } from "./lru";
import { tableFind, tableInsert } from "./table";

export { LIVE, PENDING } from "./layout";

export const LS_ERR_RANGE: i32 = ERR_OUT_OF_RANGE;
export const LS_ERR_STATE: i32 = E_STATE; // the slot is not in the state the call needs

@inline function inRange(m: Manager, slot: i32): bool {
  return slot > 0 && slot < m.numBlocks;
}

/** A free slot (evicting at most one checkpoint), marked with `flag`; 0 when none. */
export function takeSlot(m: Manager, flag: u8): i32 {
  const one = sideScratch() + 16;
  if (allocate(m, 1, one) < 0) return 0;
  const slot = load<i32>(one);
  setFlags(m, slot, flag);
  return slot;
}

/** Gives back a live or pending slot: 0, or an error code. */
export function giveBack(m: Manager, slot: i32, flag: u8): i32 {
  if (!inRange(m, slot)) return LS_ERR_RANGE;
  if ((flagsOf(m, slot) & flag) == 0) return LS_ERR_STATE;
  dropRef(m, slot);
  return 0;
}

/** The committed slot of the hash at `key`, or 0. */
@inline export function committed(m: Manager, key: usize): i32 {
  return tableFind(m, key);
}

/** Pins the committed slot of `key` and makes it the most recent; 0 on a miss. */
export function pin(m: Manager, key: usize): i32 {
  m.matchCalls++;
  const slot = tableFind(m, key);
  if (slot == 0) return 0;
  addRef(m, slot);
  touch(m, slot);
  m.blocksHit++;
  return slot;
}

export function unpin(m: Manager, slot: i32): i32 {
  if (!inRange(m, slot)) return LS_ERR_RANGE;
  if ((flagsOf(m, slot) & CACHED) == 0 || refOf(m, slot) < 2) return LS_ERR_STATE;
  dropRef(m, slot);
  return 0;
}

/**
 * reserve_checkpoint: a committed hash is touched (and pinned when `pinIt`)
 * and returned negated; otherwise a pending slot stamped with the hash, or 0
 * when no slot can be freed.
 */
export function reserve(m: Manager, key: usize, pinIt: i32): i32 {
  const found = tableFind(m, key);
  if (found != 0) {
    if (pinIt != 0) addRef(m, found);
    touch(m, found);
    return -found;
  }
  const slot = takeSlot(m, PENDING | STAMPED);
  if (slot != 0) copyHash(hashPtr(m, slot), key);
  return slot;
}

/**
 * insert_checkpoint of a slot the caller holds (pending, or live when
 * promoted) under the hash stamped on it: it becomes a committed checkpoint
 * at the most recent end, or, when the hash got committed meanwhile, the
 * existing entry wins (touched) and the slot is freed. Returns the committed slot.
 */
function graft(m: Manager, slot: i32): i32 {
  const found = tableFind(m, hashPtr(m, slot));
  if (found != 0) {
    touch(m, found);
    dropRef(m, slot);
    return found;
  }
  return graftNew(m, slot);
}

/** graft of a slot whose hash is known not to be committed: it becomes the most recent checkpoint. */
function graftNew(m: Manager, slot: i32): i32 {
  setFlags(m, slot, CACHED | STAMPED);
  tableInsert(m, slot);
  lruAdd(m, slot);
  m.numUsed--; // the holder's reference is now the cache's
  m.numCached++;
  m.numEvictable++;
  m.blocksInserted++;
  return slot;
}

export function commit(m: Manager, slot: i32): i32 {
  if (!inRange(m, slot)) return LS_ERR_RANGE;
  if ((flagsOf(m, slot) & PENDING) == 0) return LS_ERR_STATE;
  return graft(m, slot);
}

/** A live slot becomes the checkpoint of the hash at `key` (promotion). */
export function promote(m: Manager, slot: i32, key: usize): i32 {
  if (!inRange(m, slot)) return LS_ERR_RANGE;
  if ((flagsOf(m, slot) & LIVE) == 0) return LS_ERR_STATE;
  copyHash(hashPtr(m, slot), key);
  setFlags(m, slot, LIVE | STAMPED);
  return graft(m, slot);
}

/** 0 free, 1 live, 2 pending, 3 committed. */
export function stateOf(m: Manager, slot: i32): i32 {
  if (refOf(m, slot) == 0) return 0;
  const f = flagsOf(m, slot);
  if ((f & CACHED) != 0) return 3;
  if ((f & PENDING) != 0) return 2;
  return 1;
}

/**
 * Trims a KV prefix match to linear-state boundaries (docs/linear-state.md): the
 * boundary after KV block ids[i] is usable when its stamped chain hash has a
 * committed checkpoint. Walks i in [from, limit): 'furthest' keeps the last
 * usable boundary, 'contiguous' stops at the first unusable one. Returns the
 * number of blocks to keep.
 */
export function trimTo(ls: Manager, kv: Manager, ids: usize, from: i32, limit: i32, contiguous: i32): i32 {
  let safe = from;
  for (let i = from; i < limit; i++) {
    const id = load<i32>(ids + (<usize>i << 2));
    const ok = (flagsOf(kv, id) & STAMPED) != 0 && tableFind(ls, hashPtr(kv, id)) != 0;
    if (ok) safe = i + 1;
    else if (contiguous != 0) break;
  }
  return safe;
}

/**
 * Audit of the slot states on top of the manager audit: every held slot is
 * exactly one of live, pending, committed; live and pending slots have one
 * holder. Writes the live, pending, pinned
 * counts and the total pins to `counts`; returns 0, or -30 with `errorIndex` = the slot.
 */
export function auditStates(m: Manager, counts: usize): i32 {
  let live = 0, pending = 0, pinned = 0, pins = 0;
  for (let s = 1; s < m.numBlocks; s++) {
    const r = refOf(m, s);
    if (r == 0) continue;
    const f = flagsOf(m, s) & (LIVE | PENDING | CACHED);
    if ((f != LIVE && f != PENDING && f != CACHED) || (f != CACHED && r != 1)) {
      setErrorIndex(s);
      return CHECK_SLOT_STATE;
    }
    if (f == LIVE) live++;
    else if (f == PENDING) pending++;
    else if (r > 1) {
      pinned++;
      pins += r - 1;
    }
  }
  store<i32>(counts, live);
  store<i32>(counts, pending, 4);
  store<i32>(counts, pinned, 8);
  store<i32>(counts, pins, 12);
  return 0;
}

/** Index + 1 of the key equal to keys[i] among those the batch set holds, or 0 (then it is added). */
function seenBefore(keys: usize, i: i32, set: usize, setMask: i32): i32 {
  const k = keys + (<usize>i << 4);
  const lo = load<u64>(k);
  const hi = load<u64>(k, 8);
  let j = <i32>(<u32>(lo ^ (lo >> 29) ^ hi)) & setMask;
  while (true) {
    const a = set + (<usize>j << 2);
    const e = load<i32>(a);
    if (e == 0) {
      store<i32>(a, i + 1);
      return 0;
    }
    const o = keys + (<usize>(e - 1) << 4);
    if (load<u64>(o) == lo && load<u64>(o, 8) == hi) return e;
    j = (j + 1) & setMask;
  }
}

/**
 * The batch of one prefill, resolved and committed at once: exactly what the
 * bindings' resolveCacheOps then commitReservations do for a first op that
 * restores from `restoreKey` (0: none) and then a save of each of the `n`
 * keys at `keys` (16 bytes each), none of them a promotion. In that order:
 * the restore pins its checkpoint; each save (a key saved earlier in the
 * batch reuses that save's slot) pins the committed checkpoint of its key,
 * or reserves a pending slot (evicting at most one checkpoint), or gets
 * none; the reservations are committed in order; the restore pin, then the
 * save pins are released. `scratch` holds 3n + 1 + setMask + 1 i32, the
 * last setMask + 1 zeroed by the caller (setMask + 1 a power of two >= 2n).
 * Writes each save's slot (-1 for none) to scratch[0, n) and the restored
 * slot (0 for none or a miss) to scratch[n]; returns the number of
 * checkpoints committed.
 */
export function prefillBatch(m: Manager, restoreKey: usize, keys: usize, n: i32, scratch: usize, setMask: i32): i32 {
  const slots = scratch;
  const pins = scratch + (<usize>(n + 1) << 2);
  const reserved = pins + (<usize>n << 2);
  const set = reserved + (<usize>n << 2);
  const inserted = m.blocksInserted;
  const restored = restoreKey != 0 ? pin(m, restoreKey) : 0;
  store<i32>(slots + (<usize>n << 2), restored);
  let nPins = 0;
  let nReserved = 0;
  let exhausted = false;
  // Set once the slots ran out while every committed checkpoint was pinned
  // by this batch (its distinct pins, the restore's included, number them
  // all): a later key can then only be committed as an earlier key of the
  // batch (seenBefore has it) or as the restore key, so it needs no lookup.
  let pinnedAll = false;
  let restorePinnedAgain = false;
  let failures: u64 = 0;
  const restoreLo = restored != 0 ? load<u64>(restoreKey) : 0;
  const restoreHi = restored != 0 ? load<u64>(restoreKey, 8) : 0;
  for (let i = 0; i < n; i++) {
    const seen = seenBefore(keys, i, set, setMask);
    let slot: i32;
    if (seen != 0) slot = load<i32>(slots + (<usize>(seen - 1) << 2));
    else {
      // reserve(), with the committed lookup done once: a committed key is
      // pinned and touched; else a pending slot, unless the slots ran out.
      const key = keys + (<usize>i << 4);
      const found = !pinnedAll
        ? committed(m, key)
        : restored != 0 && load<u64>(key) == restoreLo && load<u64>(key, 8) == restoreHi ? restored : 0;
      if (found != 0) {
        if (found == restored) restorePinnedAgain = true;
        addRef(m, found);
        touch(m, found);
        slot = found;
        store<i32>(pins + (<usize>nPins << 2), slot);
        nPins++;
      } else if (!exhausted) {
        slot = takeSlot(m, PENDING | STAMPED);
        if (slot != 0) {
          copyHash(hashPtr(m, slot), key);
          store<i32>(reserved + (<usize>nReserved << 2), slot);
          nReserved++;
        } else {
          // No free slot and nothing evictable: until the commits below, no
          // reservation of this batch can free one, so the next ones fail
          // the same way (their failures counted, their walks skipped: the
          // walk that failed here already parked every held entry it met).
          exhausted = true;
          pinnedAll = nPins + (restored != 0 && !restorePinnedAgain ? 1 : 0) == m.numCached;
          slot = -1;
        }
      } else {
        failures++;
        slot = -1;
      }
    }
    store<i32>(slots + (<usize>i << 2), slot);
  }
  // Each reserved slot is pending (taken above) under a key the loop did
  // not find committed, and the batch's keys are distinct: commit() without
  // its checks, and graft() without its lookup.
  for (let i = 0; i < nReserved; i++) graftNew(m, load<i32>(reserved + (<usize>i << 2)));
  m.allocFailures += failures;
  if (restored != 0) unpin(m, restored);
  for (let i = 0; i < nPins; i++) unpin(m, load<i32>(pins + (<usize>i << 2)));
  return <i32>(m.blocksInserted - inserted);
}
