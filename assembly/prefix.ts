// The prefix cache: match and insert over chains of full blocks.
//
// A block's key chains its parent's key with its tokens (chain.ts). Match
// walks from the first block and stops at the first miss; insert adds the
// blocks it has not seen and refreshes the ones it has. Both re-append the
// entries they visit in reverse visiting order, so the root of a chain is the
// most recent and eviction takes chain tails first.

import {
  Manager, CACHED, STAMPED, POLICY_LRU, POLICY_LFU, POLICY_PRIORITY, META_SHIFT, META_REFS, META_HASH, DENSE_REF_SHIFT, keyOf, setKey, flagsOf, hashPtr, copyHash,
  ERR_UNSTAMPED_PARENT, ERR_NOT_HELD, ERR_TOKENS_MISSING, setErrorIndex, idError,
} from "./layout";
import { addRef, pushFree, checkReferenced } from "./idpool";
import { touchAll, lruRemove } from "./lru";
import { applyBatch, resetBatch } from "./priority";
import { tableFind, tableFindOrAdd, readHomes } from "./table";
import { chainHash, hashChain } from "./chain";
import { recordStored } from "./events";
import { alloc } from "./heap";
import { MATCH_TOUCH as M_TOUCH, MATCH_COUNT as M_COUNT, EV_PARENT_NONE, EV_PARENT_CHAIN, EV_PARENT_SALT } from "../bindings/core/abi";

// Scratch: two 16-byte slots (the hash being computed and the previous one),
// a 16-byte parent carried between insert windows, then one window of hashes
// (INSERT_WINDOW x 16 bytes). The shared-memory build gives each instance
// (thread) its own.
const INSERT_WINDOW: i32 = 64;
// After them, SIDE_SCRATCH bytes for the host tier's peek and the
// linear-state cache (sideScratch).
const SIDE_SCRATCH: i32 = 32;
const SCRATCH_BYTES: i32 = 48 + INSERT_WINDOW * 16 + SIDE_SCRATCH;
const scratch: usize = ASC_FEATURE_THREADS ? alloc(SCRATCH_BYTES) : memory.data(SCRATCH_BYTES, 16);
/** Keeps the prefetch loads of insert() alive (never read). */
let sink: u32 = 0;

/** This instance's scratch region (the shared build gives it back when a thread leaves). */
export function prefixScratch(): usize {
  return scratch;
}

/**
 * 32 bytes of this instance's scratch that prefix calls never use. Static
 * data (memory.data) would be one address for every thread of the shared
 * build, so two threads working on two managers would share it.
 */
export function sideScratch(): usize {
  return scratch + 48 + <usize>INSERT_WINDOW * 16;
}

/**
 * The parent hash for a walk that starts after existing blocks: the hash
 * stamped on `parentId`, the 16 bytes at `parentPtr`, or none (0). Returns 1
 * when `parentId` was given but carries no hash yet.
 */
@inline function parentOf(m: Manager, parentId: i32, parentPtr: usize): usize {
  if (parentId > 0) {
    if (parentId >= m.numBlocks || (flagsOf(m, parentId) & STAMPED) == 0) return 1;
    return hashPtr(m, parentId);
  }
  return parentPtr;
}

/**
 * What an insert's first parent is, for its stored event: a block's hash
 * (parentId > 0, or a hash the caller computed), a cache salt's digest
 * (parentId = PARENT_SALT_ROOT) or nothing (block 0 of an unsalted sequence).
 */
@inline function parentKind(parentId: i32, parent: usize): i32 {
  if (parentId < 0) return EV_PARENT_SALT;
  return parent == 0 ? EV_PARENT_NONE : EV_PARENT_CHAIN;
}

/** match() flags: re-append the hits now; count this call in the statistics. */
export const MATCH_TOUCH: i32 = M_TOUCH;
export const MATCH_COUNT: i32 = M_COUNT;

/**
 * Matches up to `nBlocks` full blocks of tokens (at `tokens`, 16 writable bytes
 * before it) against the cache; writes the hit ids to `out`, adding one
 * reference to each. A long match may come in windows: only the last one
 * re-appends (touchReversed over all hits) and only the first one counts the
 * call and its `queried` blocks. Returns the number of hits or ERR_UNSTAMPED_PARENT.
 */
export function match(m: Manager, tokens: usize, nBlocks: i32, parentId: i32, parentPtr: usize, out: usize, flags: i32, queried: i32): i32 {
  let parent = parentOf(m, parentId, parentPtr);
  if (parent == 1) return ERR_UNSTAMPED_PARENT;
  if ((flags & MATCH_COUNT) != 0) {
    m.matchCalls++;
    m.blocksQueried += <u64>queried;
  }
  if (m.prefixOn == 0) return 0;
  const bytes = <usize>m.blockSize << 2;
  const keys = scratch + 48;
  let hits = 0;
  // Windows of blocks: a block's key does not depend on what the table
  // holds, so a window is hashed first and its home buckets read with no
  // branch on their content (their cache misses overlap, where a lookup
  // per hashed block waited for each in turn); then the lookups, up to
  // the first miss. The blocks hashed past a miss are the price.
  for (let w = 0; w < nBlocks; w += INSERT_WINDOW) {
    const n = w + INSERT_WINDOW < nBlocks ? INSERT_WINDOW : nBlocks - w;
    hashChain(tokens + <usize>w * bytes, bytes, n, parent, m.seed, keys);
    sink += readHomes(m, keys, n);
    let b = 0;
    for (; b < n; b++) {
      const id = tableFind(m, keys + (<usize>b << 4));
      if (id == 0) break;
      addRef(m, id);
      store<i32>(out + (<usize>hits << 2), id);
      hits++;
    }
    if (b < n) break;
    copyHash(scratch + 32, keys + (<usize>(n - 1) << 4));
    parent = scratch + 32;
  }
  if ((flags & MATCH_TOUCH) != 0) touchReversed(m, out, hits);
  m.blocksHit += <u64>hits;
  return hits;
}

/**
 * LFU: one more hit on each entry of a batch ids[0..n) listed root first (0 =
 * none), each clamped to at most the entry before it, so a chain's keys never
 * grow towards its tail and equal keys leave the tail older (evicted first).
 */
function countHits(m: Manager, ids: usize, n: i32): void {
  let cap: u32 = 0xffffffff;
  for (let i = 0; i < n; i++) {
    const id = load<i32>(ids + (<usize>i << 2));
    if (id == 0) continue;
    lruRemove(m, id); // out of the heap before its key changes (the touch puts it back)
    let k = keyOf(m, id);
    if (k != 0xffffffff) k++;
    if (k > cap) k = cap;
    setKey(m, id, k);
    cap = k;
  }
}

/** Re-appends ids[0..n) in reverse order: the first ends most recent. */
export function touchReversed(m: Manager, ids: usize, n: i32): void {
  if (m.policy == POLICY_LFU) countHits(m, ids, n);
  touchAll(m, ids, n);
}

/**
 * Checks that every one of ids[0..n) is held by someone other than the cache.
 * Returns 0, or an error code with errorIndex set (`base` + the index).
 */
export function checkInsertIds(m: Manager, ids: usize, n: i32, base: i32 = 0): i32 {
  // The record stride as a constant in each copy (a variable shift ties up a register).
  return m.refShift == <u32>META_SHIFT ? checkHeld(m, ids, n, base, META_SHIFT) : checkHeld(m, ids, n, base, DENSE_REF_SHIFT);
}

/** checkInsertIds with the references `rs` bits apart (m.refShift). */
// @ts-ignore: decorator
@inline function checkHeld(m: Manager, ids: usize, n: i32, base: i32, rs: usize): i32 {
  // The header's fields in locals: read once, not once per id. (An id's
  // hash is on its record's line: reading the references brings it in.)
  // The loop only finds the first bad id (one unsigned compare for the
  // range: 0 and negatives wrap past it); why it is bad is worked out after.
  const last = <u32>(m.numBlocks - 1);
  const refs = m.refs;
  const flags = m.flags;
  let b = 0;
  for (; b < n; b++) {
    const id = load<i32>(ids + (<usize>b << 2));
    if (<u32>(id - 1) >= last) break;
    if (load<i32>(refs + (<usize>id << rs)) - <i32>(load<u8>(flags + <usize>id) & CACHED) <= 0) break;
  }
  if (b == n) return 0;
  setErrorIndex(base + b);
  return idError(load<i32>(ids + (<usize>b << 2)), last, ERR_NOT_HELD);
}

/**
 * One block of an insert: the key at `key` for the caller's block at `idAddr`.
 * A key already cached keeps its block (the entry is visited); a new key
 * caches the caller's block (one more reference) unless that block is already
 * cached under another key. Stamps the key on the caller's block when it is
 * not cached. Overwrites *idAddr with the entry visited (0 for none) and
 * returns 1 when a new entry was made (the caller counts it in numCached).
 * The header's fields come as arguments: a loop reads them once.
 */
@inline function insertOneIn(
  m: Manager, flags: usize, records: usize, keyed: bool, table: usize, bucketMask: u32, tagMask: u32,
  idAddr: usize, key: usize, handOver: bool,
): i32 {
  const id = load<i32>(idAddr);
  const fa = flags + <usize>id;
  const f = load<u8>(fa);
  const fresh = (f & CACHED) == 0;
  // A miss caches the caller's block, unless it is cached under another key.
  const found = tableFindOrAdd(m, table, bucketMask, tagMask, records, key, fresh ? id : 0);
  let visited = found;
  let added = 0;
  if (handOver) {
    // The caller's only reference goes to the cache, or the block is freed (see insertHandingOver).
    const rec = records + (<usize>id << META_SHIFT);
    if (found == 0) {
      store<u64>(rec, load<u64>(key), META_HASH);
      store<u64>(rec, load<u64>(key, 8), META_HASH + 8);
      store<u8>(fa, CACHED | STAMPED);
      if (keyed) setKey(m, id, 0); // LRU never reads keys
      added = 1;
      visited = id;
    } else {
      store<u8>(fa, 0);
      store<i32>(rec, 0, META_REFS);
      pushFree(m, id);
    }
  } else if (fresh) {
    const rec = records + (<usize>id << META_SHIFT);
    store<u64>(rec, load<u64>(key), META_HASH);
    store<u64>(rec, load<u64>(key, 8), META_HASH + 8);
    if (found == 0) {
      store<u8>(fa, CACHED | STAMPED);
      if (keyed) setKey(m, id, 0); // LRU never reads keys
      store<i32>(rec, load<i32>(rec, META_REFS) + 1, META_REFS);
      added = 1;
      visited = id;
    } else {
      // The caller's block duplicates a cached one: stamp it, do not cache it.
      store<u8>(fa, f | STAMPED);
    }
  }
  store<i32>(idAddr, visited);
  return added;
}

/**
 * insertOneIn over ids[from, to) with keys at keys + 16 * (b - from), the
 * header's fields read once. With `events`, records a stored event per new
 * entry (its parent hash is the key before it, `firstParent` for b == from;
 * its tokens at tokens + b * bytes). Returns the new entries (counted in numCached).
 */
@inline export function insertRange(
  m: Manager, ids: usize, from: i32, to: i32, keys: usize, events: bool, tokens: usize, bytes: usize, firstParent: usize, firstKind: i32,
  handOver: bool = false,
): i32 {
  const flags = m.flags;
  // Only a caching manager gets here (its callers return first otherwise):
  // an id's references, key and fingerprint are on its record, reached
  // from one base (the loop's locals fit in registers).
  const records = m.refs - META_REFS;
  const keyed = m.policy != POLICY_LRU;
  const table = m.table;
  const bucketMask = m.bucketMask;
  const tagMask = m.tagMask;
  let added = 0;
  if (!events) {
    // A loop of its own, walking pointers: the events' arguments, live
    // through the loop below, would push its locals out of registers.
    const end = ids + (<usize>to << 2);
    let key = keys;
    for (let a = ids + (<usize>from << 2); a < end; a += 4, key += 16) {
      added += insertOneIn(m, flags, records, keyed, table, bucketMask, tagMask, a, key, handOver);
    }
  } else {
    for (let b = from; b < to; b++) {
      const key = keys + (<usize>(b - from) << 4);
      const idAddr = ids + (<usize>b << 2);
      const made = insertOneIn(m, flags, records, keyed, table, bucketMask, tagMask, idAddr, key, false);
      if (made != 0) {
        recordStored(m, load<i32>(idAddr), b == from ? firstKind : EV_PARENT_CHAIN, b == from ? firstParent : key - 16, tokens + <usize>b * bytes);
      }
      added += made;
    }
  }
  m.numCached += added;
  return added;
}

/** Re-appends the entries an insert visited (ids[0..n), 0 = none) in reverse order. */
export function touchVisited(m: Manager, ids: usize, n: i32): void {
  if (m.policy == POLICY_LFU) countHits(m, ids, n);
  else if (m.policy == POLICY_PRIORITY) applyBatch(m, ids, n);
  touchAll(m, ids, n);
}

/** True when ids[0, n) are in range and carry a stamped hash, and events are off (the tokens of those blocks are not needed). */
function stampsCover(m: Manager, ids: usize, n: i32): bool {
  if (m.eventsOn != 0 || m.prefixOn == 0) return false;
  for (let b = 0; b < n; b++) {
    const id = load<i32>(ids + (<usize>b << 2));
    if (id <= 0 || id >= m.numBlocks || (flagsOf(m, id) & STAMPED) == 0) return false;
  }
  return true;
}

/**
 * Stamps on ids[0, nBlocks) the chain hashes of `nBlocks` full blocks of
 * tokens at `tokens` (16 writable bytes before it), block 0 chained on the
 * hash stamped on `parentId` or the 16 bytes at `parentPtr` (neither: block
 * 0 alone), so that a later insert of the same tokens takes them as
 * `known` instead of hashing (a pool stamps a prompt at prefill, while its
 * tokens are at hand). Every id must be held; a cached id already carries
 * its key and is left alone. Returns 0, or a negative error code with
 * errorIndex set (nothing changed).
 */
export function stampChain(m: Manager, tokens: usize, ids: usize, nBlocks: i32, parentId: i32, parentPtr: usize): i32 {
  const bad = checkReferenced(m, ids, nBlocks);
  if (bad != 0) return bad;
  const parent = parentOf(m, parentId, parentPtr);
  if (parent == 1) return ERR_UNSTAMPED_PARENT;
  if (m.prefixOn == 0 || nBlocks <= 0) return 0;
  // The header's fields in locals (the loops' stores could alias them, so
  // they would be read again for each id).
  const bytes = <usize>m.blockSize << 2;
  const out = scratch + 48;
  const flags = m.flags;
  const hashes = m.hashes;
  const seed = m.seed;
  let prev = parent;
  for (let w = 0; w < nBlocks; w += INSERT_WINDOW) {
    const n = w + INSERT_WINDOW < nBlocks ? INSERT_WINDOW : nBlocks - w;
    hashChain(tokens + <usize>w * bytes, bytes, n, prev, seed, out);
    for (let b = 0; b < n; b++) {
      const id = load<i32>(ids + (<usize>(w + b) << 2));
      const fa = flags + <usize>id;
      const f = load<u8>(fa);
      if ((f & CACHED) != 0) continue;
      v128.store(hashes + (<usize>id << META_SHIFT), v128.load(out + (<usize>b << 4)));
      store<u8>(fa, f | STAMPED);
    }
    copyHash(scratch + 32, out + (<usize>(n - 1) << 4));
    prev = scratch + 32;
  }
  return 0;
}

/**
 * Inserts the chain of `nBlocks` full blocks (tokens at `tokens`, ids at
 * `ids`; every id must be held by someone other than the cache), block by
 * block as insertOneIn says, then re-appends the visited entries. Overwrites
 * `ids` with the entries visited. Returns the number of new entries, or a
 * negative error code. The first `known` blocks' keys are the hashes stamped
 * on their ids (the caller knows it stamped them from these very tokens, as
 * a pool does for a sequence it published or prefilled): they are not hashed
 * again. `tokens` holds the tokens from block `staged` (<= known) on: blocks
 * before it must carry their stamp, and events must be off (a stored event
 * carries its block's tokens), else nothing changes and the result is
 * ERR_TOKENS_MISSING.
 */
export function insert(m: Manager, tokens: usize, ids: usize, nBlocks: i32, parentId: i32, parentPtr: usize, known: i32 = 0, staged: i32 = 0): i32 {
  if (staged > 0 && !stampsCover(m, ids, staged < nBlocks ? staged : nBlocks)) return ERR_TOKENS_MISSING;
  // Block b's tokens sit at block (b - staged)'s place.
  tokens -= <usize>staged * (<usize>m.blockSize << 2);
  // The ids' records (their hashes included) are read here first, with no branch on what they hold.
  const bad = checkInsertIds(m, ids, nBlocks);
  if (bad != 0) {
    // Nothing changes: the staged priorities are dropped too. (An unstamped
    // parent keeps them: the bindings retry the same insert.)
    if (m.policy == POLICY_PRIORITY) resetBatch(m, nBlocks < m.numBlocks ? nBlocks : m.numBlocks);
    return bad;
  }
  let parent = parentOf(m, parentId, parentPtr);
  if (parent == 1) return ERR_UNSTAMPED_PARENT;
  if (m.prefixOn == 0) return 0;
  const bytes = <usize>m.blockSize << 2;
  const carry = scratch + 32;
  const hashes = scratch + 48;
  const parent0 = parent;
  let added = 0;
  // Windows of blocks: hash the window, then read each block's home table
  // slot with no branch on what it holds, then insert. The reads are
  // independent, so their cache misses overlap instead of arriving one per
  // block inside the branchy table probe (a block's table slot is random).
  for (let w = 0; w < nBlocks; w += INSERT_WINDOW) {
    const end = w + INSERT_WINDOW < nBlocks ? w + INSERT_WINDOW : nBlocks;
    let b = w;
    for (; b < end && b < known; b++) {
      const out = hashes + (<usize>(b - w) << 4);
      const id = load<i32>(ids + (<usize>b << 2));
      if ((flagsOf(m, id) & STAMPED) != 0) copyHash(out, hashPtr(m, id));
      else chainHash(tokens + <usize>b * bytes, bytes, parent, m.seed, out);
      parent = out;
    }
    if (b < end) hashChain(tokens + <usize>b * bytes, bytes, end - b, parent, m.seed, hashes + (<usize>(b - w) << 4));
    sink += readHomes(m, hashes, end - w);
    added += insertRange(m, ids, w, end, hashes, m.eventsOn != 0, tokens, bytes, w == 0 ? parent0 : carry, w == 0 ? parentKind(parentId, parent0) : EV_PARENT_CHAIN);
    // The next window's first parent; `hashes` is overwritten.
    copyHash(carry, hashes + (<usize>(end - 1 - w) << 4));
    parent = carry;
  }
  touchVisited(m, ids, nBlocks);
  m.blocksInserted += <u64>added;
  return added;
}
