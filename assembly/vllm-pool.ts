// vLLM v1's block pool (docs/engines.md, the vLLM engine) in flat arrays:
// one FIFO free queue of never-used and cached-free blocks, an intrusive
// doubly-linked list by block id; a key table whose entry is the oldest
// block cached under a key, the other blocks of that key chained behind it
// in insertion order (vLLM keeps duplicates); lazy eviction when a keyed
// block is popped; frees appended to the tail. The model's twin is
// model/vllm/block-pool.ts.
//
// Per block a 32-byte record: its key (16 bytes), its references, its
// queue links and its flags, what a pop, a touch and a cache read together;
// and a pair of links to the other blocks of its key. Record `numBlocks` is
// the queue's sentinel: its `next` is the head, its `prev` the tail.

import { alloc, release as releaseRegion } from "./heap";
import { slotNew, slotPublish, slotFree } from "./handles";
import {
  MAGIC_VLLM_POOL, MAX_REGION_BYTES, ERR_OUT_OF_RANGE, ERR_PADDING, ERR_NOT_HELD, ERR_DUPLICATE, ERR_CACHED, ERR_COUNT, VP_NO_ROOM,
  CHECK_HEADER, CHECK_PADDING, CHECK_QUEUE, CHECK_QUEUE_MEMBERS, CHECK_KEYS, CHECK_CACHED, CHECK_LOST, CHECK_HOLDERS,
  VP_EVENT_SIZE, VP_EVENT_KEY,
} from "../bindings/core/abi";
import { setErrorIndex } from "./layout";

@unmanaged
export class VllmPool {
  magic: u32 = 0;
  gen: u32 = 0;
  lockWord: i32 = 0;
  lockDepth: i32 = 0;
  numBlocks: i32 = 0;
  numFree: i32 = 0; // blocks in the queue
  numCached: i32 = 0; // blocks with a key
  numKeys: i32 = 0; // distinct keys (table entries)
  bucketMask: u32 = 0; // table buckets - 1
  tagMask: u32 = 0; // the entry bits above the id's
  recs: usize = 0; // REC bytes per block
  links: usize = 0; // (prev, next) i32 per block, numBlocks + 1 pairs: the free queue
  dups: usize = 0; // (older, newer) i32 per block: the circular chain of a key's blocks (DUPS only)
  table: usize = 0; // 64-byte buckets (see the key table)
  arrays: usize = 0;
  allocated: u64 = 0;
  evicted: u64 = 0;
  stored: u64 = 0;
  checksum: u32 = 0;
  // The eviction log (BlockRemoved events): VP_EVENT_SIZE bytes per eviction.
  eventsOn: i32 = 0;
  eventsLen: i32 = 0; // records
  eventsCap: i32 = 0;
  eventsLost: i32 = 0;
  events: usize = 0;
}

const REC: usize = 32;
const R_KEY: usize = 0;
const R_REF: usize = 16;
const R_FLAGS: usize = 20;
const KEYED: u8 = 1;
const QUEUED: u8 = 2;
const MARK: u8 = 4;
const DUPS: u8 = 8; // its key is cached on other blocks too (its links in `dups` are live)

// @ts-ignore: decorator
@inline function rec(p: VllmPool, id: i32): usize {
  return p.recs + <usize>id * REC;
}
// @ts-ignore: decorator
@inline function refOf(p: VllmPool, id: i32): i32 {
  return load<i32>(rec(p, id) + R_REF);
}
// @ts-ignore: decorator
@inline function setRef(p: VllmPool, id: i32, v: i32): void {
  store<i32>(rec(p, id) + R_REF, v);
}
// @ts-ignore: decorator
@inline function flagsOf(p: VllmPool, id: i32): u8 {
  return load<u8>(rec(p, id) + R_FLAGS);
}
// @ts-ignore: decorator
@inline function setFlags(p: VllmPool, id: i32, f: u8): void {
  store<u8>(rec(p, id) + R_FLAGS, f);
}
// @ts-ignore: decorator
@inline function prevOf(p: VllmPool, id: i32): i32 {
  return load<i32>(p.links + (<usize>id << 3));
}
// @ts-ignore: decorator
@inline function nextOf(p: VllmPool, id: i32): i32 {
  return load<i32>(p.links + (<usize>id << 3), 4);
}
// @ts-ignore: decorator
@inline function setPrev(p: VllmPool, id: i32, v: i32): void {
  store<i32>(p.links + (<usize>id << 3), v);
}
// @ts-ignore: decorator
@inline function setNext(p: VllmPool, id: i32, v: i32): void {
  store<i32>(p.links + (<usize>id << 3), v, 4);
}
// @ts-ignore: decorator
@inline function older(p: VllmPool, id: i32): i32 {
  return load<i32>(p.dups + (<usize>id << 3));
}
// @ts-ignore: decorator
@inline function newer(p: VllmPool, id: i32): i32 {
  return load<i32>(p.dups + (<usize>id << 3), 4);
}
// @ts-ignore: decorator
@inline function setOlder(p: VllmPool, id: i32, v: i32): void {
  store<i32>(p.dups + (<usize>id << 3), v);
}
// @ts-ignore: decorator
@inline function setNewer(p: VllmPool, id: i32, v: i32): void {
  store<i32>(p.dups + (<usize>id << 3), v, 4);
}

/** Lanes of the key table: a power of two >= 2 * numBlocks (at most numBlocks - 1 keys), 16 per bucket. */
function tableCap(numBlocks: i32): u64 {
  let cap: u64 = 16;
  while (cap < <u64>numBlocks * 2) cap <<= 1;
  return cap;
}

function arrayBytes(numBlocks: i32): u64 {
  const n = <u64>numBlocks;
  return n * <u64>REC + 64 + (n + 1) * 8 + n * 8 + tableCap(numBlocks) * 4 + 64;
}

/** Bytes a pool of `numBlocks` blocks takes (arrays, header slot), so that a caller can refuse one that cannot fit. */
export function poolBytes(numBlocks: i32): f64 {
  if (numBlocks < 2) return 0;
  return <f64>(arrayBytes(numBlocks) + 512 + 16);
}

/** A pool of `numBlocks` blocks in id order in the queue, block 0 taken as the null block; 0 when memory is exhausted. */
export function poolCreate(numBlocks: i32): usize {
  if (numBlocks < 2) return 0;
  const bytes = arrayBytes(numBlocks);
  if (bytes > <u64>MAX_REGION_BYTES) return 0;
  const slot = slotNew();
  if (slot == 0) return 0;
  const base = alloc(<usize>bytes);
  if (base == 0) {
    slotFree(slot);
    return 0;
  }
  const p = changetype<VllmPool>(slot);
  const n = <usize>numBlocks;
  p.numBlocks = numBlocks;
  p.arrays = base;
  p.recs = (base + 63) & ~(<usize>63);
  p.links = p.recs + n * REC;
  p.dups = p.links + (n + 1) * 8;
  p.table = (p.dups + n * 8 + 63) & ~(<usize>63);
  const cap = <usize>tableCap(numBlocks);
  p.bucketMask = <u32>(cap / 16 - 1);
  // Ids need the bits of numBlocks - 1; the fingerprint's bits above them tag an entry.
  p.tagMask = ~((<u32>1 << <u32>(32 - clz<u32>(<u32>(numBlocks - 1)))) - 1);
  // The queue in id order: 1 .. n-1 between the sentinel's ends (block 0 is the null block).
  const s = numBlocks;
  for (let id = 1; id < numBlocks; id++) {
    setPrev(p, id, id - 1);
    setNext(p, id, id + 1 < numBlocks ? id + 1 : s);
    setFlags(p, id, QUEUED);
  }
  setPrev(p, 1, s);
  setNext(p, s, 1);
  setPrev(p, s, numBlocks - 1);
  p.numFree = numBlocks - 1;
  slotPublish(slot, <u32>MAGIC_VLLM_POOL);
  return slot;
}

export function poolDestroy(pp: usize): void {
  const p = changetype<VllmPool>(pp);
  const arrays = p.arrays;
  const events = p.events;
  slotFree(pp);
  releaseRegion(arrays);
  releaseRegion(events);
}

// ---- the free queue ----

function unlink(p: VllmPool, id: i32): void {
  const a = prevOf(p, id);
  const b = nextOf(p, id);
  setNext(p, a, b);
  setPrev(p, b, a);
  setFlags(p, id, flagsOf(p, id) & ~QUEUED);
  p.numFree--;
}

// ---- the key table ----
// Buckets of one 64-byte line, 16 u32 lanes (as table.ts): lanes 0..14 hold
// `(fingerprint & tagMask) | id`, the oldest block of a key (0: empty; the
// null block is never cached), lane 15 counts the entries that went past
// the bucket because it was full. A lookup compares the tags of a bucket at
// once and reads a block's key on a match only; a removal finds its exact
// entry (the fingerprint comes from the block's own key, in the record it
// was popped with): one line each, no probe chains, no shifting.

const LANES: i32 = 0x7fff;

// @ts-ignore: decorator
@inline function sameKey(a: usize, b: usize): bool {
  return load<u64>(a) == load<u64>(b) && load<u64>(a, 8) == load<u64>(b, 8);
}
const CTRL: usize = 60;

// @ts-ignore: decorator
@inline function fingerprint(key: usize): u32 {
  const lo = load<u64>(key);
  return <u32>(lo ^ (lo >> 32));
}

// @ts-ignore: decorator
@inline function laneBits(e0: v128, e1: v128, e2: v128, e3: v128): i32 {
  const lo = i16x8.narrow_i32x4_s(e0, e1);
  const hi = i16x8.narrow_i32x4_s(e2, e3);
  return i8x16.bitmask(i8x16.narrow_i16x8_s(lo, hi)) & LANES;
}

/** Bit i set when lane i (0..14) of the bucket at `a` holds exactly `e`. */
// @ts-ignore: decorator
@inline function lanesEqual(a: usize, e: u32): i32 {
  const v = i32x4.splat(<i32>e);
  return laneBits(i32x4.eq(v128.load(a), v), i32x4.eq(v128.load(a, 16), v), i32x4.eq(v128.load(a, 32), v), i32x4.eq(v128.load(a, 48), v));
}

/** Bit i set when the tag of lane i (0..14) is `tag`. */
// @ts-ignore: decorator
@inline function lanesTagged(a: usize, tagMask: u32, tag: u32): i32 {
  const k = i32x4.splat(<i32>tagMask);
  const t = i32x4.splat(<i32>tag);
  return laneBits(
    i32x4.eq(v128.and(v128.load(a), k), t), i32x4.eq(v128.and(v128.load(a, 16), k), t),
    i32x4.eq(v128.and(v128.load(a, 32), k), t), i32x4.eq(v128.and(v128.load(a, 48), k), t),
  );
}

// @ts-ignore: decorator
@inline function bucket(p: VllmPool, b: u32): usize {
  return p.table + (<usize>b << 6);
}

/** Where the entry of the key at `key` is (a lane's address), or 0. */
function findEntry(p: VllmPool, key: usize): usize {
  const fp = fingerprint(key);
  const tagMask = p.tagMask;
  const tag = fp & tagMask;
  const idMask = ~tagMask;
  let b = fp & p.bucketMask;
  let found: usize = 0;
  while (found == 0) {
    const a = bucket(p, b);
    let bits = lanesTagged(a, tagMask, tag);
    while (bits != 0) {
      const lane = a + (<usize>ctz(bits) << 2);
      const id = <i32>(load<u32>(lane) & idMask);
      if (id != 0 && sameKey(rec(p, id) + R_KEY, key)) {
        found = lane;
        break;
      }
      bits &= bits - 1;
    }
    if (found == 0 && load<u32>(a, CTRL) == 0) break;
    b = (b + 1) & p.bucketMask;
  }
  return found;
}

/** The lane holding exactly `e` (present), from the home bucket `b` on. */
function laneOf(p: VllmPool, b: u32, e: u32): usize {
  for (;;) {
    const a = bucket(p, b);
    const bits = lanesEqual(a, e);
    if (bits != 0) return a + (<usize>ctz(bits) << 2);
    b = (b + 1) & p.bucketMask;
  }
}

/** Puts `e` in the first free lane from bucket `b` on, counting the full buckets passed. */
function place(p: VllmPool, b: u32, e: u32): void {
  for (;;) {
    const a = bucket(p, b);
    const free = lanesEqual(a, 0);
    if (free != 0) {
      store<u32>(a + (<usize>ctz(free) << 2), e);
      return;
    }
    store<u32>(a, load<u32>(a, CTRL) + 1, CTRL);
    b = (b + 1) & p.bucketMask;
  }
}

/** Empties the lane of entry `e` (home bucket `b`), uncounting the full buckets its insert passed. */
function unplace(p: VllmPool, b: u32, e: u32): void {
  for (;;) {
    const a = bucket(p, b);
    const bits = lanesEqual(a, e);
    if (bits != 0) {
      store<u32>(a + (<usize>ctz(bits) << 2), 0);
      return;
    }
    store<u32>(a, load<u32>(a, CTRL) - 1, CTRL);
    b = (b + 1) & p.bucketMask;
  }
}

/** The oldest block cached under `key`, or -1. */
export function lookupKey(p: VllmPool, key: usize): i32 {
  const lane = findEntry(p, key);
  return lane == 0 ? -1 : <i32>(load<u32>(lane) & ~p.tagMask);
}

/** Caches block `id` (keyless) under the key at `key`, behind the blocks cached under it already. */
function cacheBlock(p: VllmPool, id: i32, key: usize): void {
  const r = rec(p, id);
  store<u64>(r + R_KEY, load<u64>(key));
  store<u64>(r + R_KEY, load<u64>(key, 8), 8);
  const lane = findEntry(p, key);
  if (lane == 0) {
    const fp = fingerprint(key);
    place(p, fp & p.bucketMask, (fp & p.tagMask) | <u32>id);
    setFlags(p, id, flagsOf(p, id) | KEYED);
    p.numKeys++;
  } else {
    // A duplicate: chained behind the oldest (the chain is circular, the oldest's `older` is the newest).
    const first = <i32>(load<u32>(lane) & ~p.tagMask);
    if ((flagsOf(p, first) & DUPS) == 0) {
      setOlder(p, first, first);
      setNewer(p, first, first);
      setFlags(p, first, flagsOf(p, first) | DUPS);
    }
    const last = older(p, first);
    setNewer(p, last, id);
    setOlder(p, id, last);
    setNewer(p, id, first);
    setOlder(p, first, id);
    setFlags(p, id, flagsOf(p, id) | KEYED | DUPS);
  }
  p.numCached++;
  p.stored++;
}

/**
 * Caches blocks table[from, to) under keys[from, to). The common case -- a
 * new key whose home bucket has not overflowed -- compares the bucket's tags
 * and takes a free lane of it in one look at its line, the header's fields
 * in locals (stores to linear memory could alias them, so they would be
 * loaded again for each block); the rest goes through cacheBlock.
 */
function cacheRun(p: VllmPool, table: usize, keys: usize, from: i32, to: i32): void {
  const recs = p.recs;
  const tbl = p.table;
  const bucketMask = p.bucketMask;
  const tagMask = p.tagMask;
  const idMask = ~tagMask;
  let fresh = 0;
  for (let c = from; c < to; c++) {
    const id = load<i32>(table + (<usize>c << 2));
    const key = keys + (<usize>c << 4);
    const lo = load<u64>(key);
    const hi = load<u64>(key, 8);
    const fp = <u32>(lo ^ (lo >> 32));
    const a = tbl + (<usize>(fp & bucketMask) << 6);
    const v0 = v128.load(a);
    const v1 = v128.load(a, 16);
    const v2 = v128.load(a, 32);
    const v3 = v128.load(a, 48);
    const k = i32x4.splat(<i32>tagMask);
    const t = i32x4.splat(<i32>(fp & tagMask));
    let bits = laneBits(i32x4.eq(v128.and(v0, k), t), i32x4.eq(v128.and(v1, k), t), i32x4.eq(v128.and(v2, k), t), i32x4.eq(v128.and(v3, k), t));
    let known = false;
    while (bits != 0) {
      const other = <i32>(load<u32>(a + (<usize>ctz(bits) << 2)) & idMask);
      if (other != 0) {
        const o = recs + <usize>other * REC + R_KEY;
        if (load<u64>(o) == lo && load<u64>(o, 8) == hi) {
          known = true;
          break;
        }
      }
      bits &= bits - 1;
    }
    const z = i32x4.splat(0);
    const free = laneBits(i32x4.eq(v0, z), i32x4.eq(v1, z), i32x4.eq(v2, z), i32x4.eq(v3, z));
    if (known || load<u32>(a, CTRL) != 0 || free == 0) {
      cacheBlock(p, id, key);
      continue;
    }
    const r = recs + <usize>id * REC;
    store<u64>(r + R_KEY, lo);
    store<u64>(r + R_KEY, hi, 8);
    store<u32>(a + (<usize>ctz(free) << 2), (fp & tagMask) | <u32>id);
    store<u8>(r + R_FLAGS, load<u8>(r + R_FLAGS) | KEYED);
    fresh++;
  }
  p.numKeys += fresh;
  p.numCached += fresh;
  p.stored += <u64>fresh;
}

/** Drops block `id`'s key (vLLM's eviction of a popped block), recording a BlockRemoved when events are on. */
function evictBlock(p: VllmPool, id: i32): void {
  const key = rec(p, id) + R_KEY;
  const f = flagsOf(p, id);
  const fp = fingerprint(key);
  const e = (fp & p.tagMask) | <u32>id;
  if ((f & DUPS) == 0) {
    unplace(p, fp & p.bucketMask, e);
    p.numKeys--;
  } else {
    const n = newer(p, id);
    const o = older(p, id);
    setNewer(p, o, n);
    setOlder(p, n, o);
    // The oldest leaves: the next one heads the key's entry (same key, same bucket).
    const lane = findEntry(p, key);
    if (<i32>(load<u32>(lane) & ~p.tagMask) == id) store<u32>(lane, (fp & p.tagMask) | <u32>n);
    if (newer(p, n) == n) setFlags(p, n, flagsOf(p, n) & ~DUPS);
  }
  if (p.eventsOn != 0) logEviction(p, id, key);
  setFlags(p, id, f & ~(KEYED | DUPS));
  p.numCached--;
  p.evicted++;
}

function logEviction(p: VllmPool, id: i32, key: usize): void {
  if (p.eventsLost != 0) return;
  if (p.eventsLen == p.eventsCap) {
    const cap = p.eventsCap == 0 ? 256 : p.eventsCap * 2;
    // 1 GiB of records at most: a consumer that never drains loses them rather than the memory.
    const bytes = <u64>cap * <u64>VP_EVENT_SIZE;
    const grown = bytes <= (<u64>1 << 30) ? alloc(<usize>bytes) : 0;
    if (grown == 0) {
      p.eventsLost = 1;
      return;
    }
    if (p.events != 0) {
      memory.copy(grown, p.events, <usize>p.eventsLen * <usize>VP_EVENT_SIZE);
      releaseRegion(p.events);
    }
    p.events = grown;
    p.eventsCap = cap;
  }
  const e = p.events + <usize>p.eventsLen * <usize>VP_EVENT_SIZE;
  store<i32>(e, id);
  store<u64>(e + <usize>VP_EVENT_KEY, load<u64>(key));
  store<u64>(e + <usize>VP_EVENT_KEY, load<u64>(key, 8), 8);
  p.eventsLen++;
}

// ---- the operations (one call each from the bindings) ----

/**
 * get_computed_blocks: the oldest block of each of the first `n` keys at
 * `keys` (16 bytes each), to `out`, stopping at the first key not cached.
 * Returns how many; changes nothing.
 */
export function poolLookup(p: VllmPool, keys: usize, n: i32, out: usize): i32 {
  let b = 0;
  for (; b < n; b++) {
    const id = lookupKey(p, keys + (<usize>b << 4));
    if (id < 0) break;
    store<i32>(out + (<usize>b << 2), id);
  }
  return b;
}

/**
 * allocate_slots on a request's block table `table` (room for `cap` ids):
 * its `held` blocks, then `hits` prefix-cache hits (a lookup's result)
 * written after them. `need` is the blocks its tokens need in all,
 * `mustFit` (0: none) the blocks all of its tokens would need. Needed from
 * the queue: max(need - held - hits, 0) new blocks plus the hits that sit
 * in it; with mustFit, max(mustFit - held - hits, 0) plus those hits must
 * fit too. Short: VP_NO_ROOM, nothing changed. Otherwise the hits are
 * touched (out of the queue if unreferenced, one more reference), new
 * blocks popped from the head into the table (a keyed one evicted), and
 * blocks [cacheFrom, cacheTo) cached under keys[b] (16 bytes each at
 * `keys`). Returns the table's new length. Bad arguments: an error code
 * (errorIndex names the element), nothing changed.
 */
export function poolAllocate(
  p: VllmPool, table: usize, cap: i32, held: i32, hits: i32, need: i32, mustFit: i32, keys: usize, cacheFrom: i32, cacheTo: i32,
): i32 {
  if (held < 0 || hits < 0 || need < 0 || mustFit < 0 || <i64>held + <i64>hits > <i64>cap || need > cap) return ERR_COUNT;
  const base = held + hits;
  const length = need > base ? need : base;
  if (cacheFrom < 0 || cacheTo > length) return ERR_COUNT;
  const last = <u32>(p.numBlocks - 1);
  // The hits: blocks of this pool, each once.
  let code = 0;
  let evictable = 0;
  let b = held;
  for (; b < base; b++) {
    const id = load<i32>(table + (<usize>b << 2));
    if (<u32>(id - 1) >= last) {
      code = id == 0 ? ERR_PADDING : ERR_OUT_OF_RANGE;
      break;
    }
    const f = flagsOf(p, id);
    if ((f & MARK) != 0) {
      code = ERR_DUPLICATE;
      break;
    }
    setFlags(p, id, f | MARK);
    if (refOf(p, id) == 0) evictable++;
  }
  for (let c = held; c < b; c++) {
    const id = load<i32>(table + (<usize>c << 2));
    setFlags(p, id, flagsOf(p, id) & ~MARK);
  }
  if (code != 0) {
    setErrorIndex(b);
    return code;
  }
  // The blocks to cache that the table holds already must be keyless (the new ones will be), each once.
  const known = cacheTo < base ? cacheTo : base;
  let c = cacheFrom;
  for (; c < known; c++) {
    const id = load<i32>(table + (<usize>c << 2));
    if (<u32>(id - 1) >= last) {
      code = id == 0 ? ERR_PADDING : ERR_OUT_OF_RANGE;
      break;
    }
    const f = flagsOf(p, id);
    if ((f & (KEYED | MARK)) != 0) {
      code = (f & KEYED) != 0 ? ERR_CACHED : ERR_DUPLICATE;
      break;
    }
    setFlags(p, id, f | MARK);
  }
  for (let d = cacheFrom; d < c; d++) {
    const id = load<i32>(table + (<usize>d << 2));
    setFlags(p, id, flagsOf(p, id) & ~MARK);
  }
  if (code != 0) {
    setErrorIndex(c);
    return code;
  }
  const fresh = need > base ? need - base : 0;
  if (mustFit > 0) {
    const whole = mustFit > base ? mustFit - base : 0;
    if (<i64>whole + <i64>evictable > <i64>p.numFree) return VP_NO_ROOM;
  }
  if (<i64>fresh + <i64>evictable > <i64>p.numFree) return VP_NO_ROOM;

  for (c = held; c < base; c++) {
    const id = load<i32>(table + (<usize>c << 2));
    const r = refOf(p, id);
    if (r == 0) unlink(p, id);
    setRef(p, id, r + 1);
  }
  // Pops `fresh` blocks from the head in one walk (vLLM's popleft_n), relinking the sentinel once. A
  // popped block with a key of its own (no duplicates) and no events to log is evicted here, the
  // header's fields in locals; the rest through evictBlock.
  const s = p.numBlocks;
  const recs = p.recs;
  const tbl = p.table;
  const bucketMask = p.bucketMask;
  const tagMask = p.tagMask;
  const quiet = p.eventsOn == 0;
  let gone = 0;
  let h = p.checksum;
  let id = nextOf(p, s);
  for (c = base; c < length; c++) {
    const r = recs + <usize>id * REC;
    const next = nextOf(p, id);
    const f = load<u8>(r + R_FLAGS);
    if ((f & KEYED) != 0) {
      if ((f & DUPS) == 0 && quiet) {
        const lo = load<u64>(r + R_KEY);
        const fp = <u32>(lo ^ (lo >> 32));
        const e = (fp & tagMask) | <u32>id;
        const a = tbl + (<usize>(fp & bucketMask) << 6);
        const bits = lanesEqual(a, e);
        if (bits != 0) store<u32>(a + (<usize>ctz(bits) << 2), 0);
        else unplace(p, fp & bucketMask, e);
        store<u8>(r + R_FLAGS, f & ~(QUEUED | KEYED));
        gone++;
      } else {
        store<u8>(r + R_FLAGS, f & ~QUEUED);
        evictBlock(p, id);
      }
    } else {
      store<u8>(r + R_FLAGS, f & ~QUEUED);
    }
    store<i32>(r + R_REF, 1);
    store<i32>(table + (<usize>c << 2), id);
    h = h * 31 + <u32>id;
    id = next;
  }
  if (fresh > 0) {
    setNext(p, s, id);
    setPrev(p, id, s);
    p.numFree -= fresh;
  }
  p.checksum = h;
  p.numKeys -= gone;
  p.numCached -= gone;
  p.evicted += <u64>gone;
  p.allocated += <u64>fresh;
  if (cacheFrom < cacheTo) cacheRun(p, table, keys, cacheFrom, cacheTo);
  return length;
}

/**
 * free_blocks of a request's `n` blocks at `table`, last first: one
 * reference less each, then those left with none appended to the queue's
 * tail in that order, keeping their keys. 0, or an error code with nothing
 * changed (a block out of range, the null block, one without references).
 */
export function poolFree(p: VllmPool, table: usize, n: i32): i32 {
  const last = <u32>(p.numBlocks - 1);
  const recs = p.recs;
  let c = n - 1;
  let code = 0;
  for (; c >= 0; c--) {
    const id = load<i32>(table + (<usize>c << 2));
    if (<u32>(id - 1) >= last) {
      code = id == 0 ? ERR_PADDING : ERR_OUT_OF_RANGE;
      break;
    }
    const at = recs + <usize>id * REC + R_REF;
    const r = load<i32>(at);
    if (r <= 0) {
      code = ERR_NOT_HELD;
      break;
    }
    store<i32>(at, r - 1);
  }
  if (code != 0) {
    for (let d = n - 1; d > c; d--) {
      const id = load<i32>(table + (<usize>d << 2));
      setRef(p, id, refOf(p, id) + 1);
    }
    setErrorIndex(c);
    return code;
  }
  // Appended in one run behind the tail, the header's fields in locals.
  const links = p.links;
  const s = p.numBlocks;
  let tail = load<i32>(links + (<usize>s << 3));
  let added = 0;
  for (c = n - 1; c >= 0; c--) {
    const id = load<i32>(table + (<usize>c << 2));
    const r = recs + <usize>id * REC;
    const f = load<u8>(r + R_FLAGS);
    // A block listed twice is appended once.
    if (load<i32>(r + R_REF) == 0 && (f & QUEUED) == 0) {
      store<u8>(r + R_FLAGS, f | QUEUED);
      store<i32>(links + (<usize>tail << 3), id, 4);
      store<i32>(links + (<usize>id << 3), tail);
      tail = id;
      added++;
    }
  }
  store<i32>(links + (<usize>tail << 3), s, 4);
  store<i32>(links + (<usize>s << 3), tail);
  p.numFree += added;
  return 0;
}

/** Free blocks without a key. */
export function freeUncached(p: VllmPool): i32 {
  let n = 0;
  for (let id = 1; id < p.numBlocks; id++) if ((flagsOf(p, id) & (QUEUED | KEYED)) == QUEUED) n++;
  return n;
}

/** Events: recording on or off (off forgets the log). */
export function poolRecord(p: VllmPool, on: i32): void {
  p.eventsOn = on != 0 ? 1 : 0;
  if (on == 0) poolClearEvents(p);
}

export function poolClearEvents(p: VllmPool): void {
  p.eventsLen = 0;
  p.eventsLost = 0;
}

// ---- the audit ----

function fail(code: i32, id: i32): i32 {
  setErrorIndex(id);
  return code;
}

/**
 * Full-state audit: the queue is a well-linked list of numFree blocks, each
 * without references and flagged; every other block has references; the
 * null block is untouched; the table holds each key's oldest block once, and
 * each key's blocks chain among themselves; the counters match.
 */
export function poolCheck(p: VllmPool): i32 {
  const code = audit(p);
  for (let id = 0; id < p.numBlocks; id++) setFlags(p, id, flagsOf(p, id) & ~MARK);
  return code;
}

function audit(p: VllmPool): i32 {
  const n = p.numBlocks;
  if (p.magic != <u32>MAGIC_VLLM_POOL || p.gen == 0 || n < 2 || p.arrays == 0) return fail(CHECK_HEADER, -1);
  if (refOf(p, 0) != 0 || flagsOf(p, 0) != 0) return fail(CHECK_PADDING, 0);
  // Walk the queue from the head: each step's back link must point where it came from.
  const s = n;
  let prev = s;
  let id = nextOf(p, s);
  let count = 0;
  while (id != s) {
    if (<u32>(id - 1) >= <u32>(n - 1) || count >= n) return fail(CHECK_QUEUE, id);
    if (prevOf(p, id) != prev) return fail(CHECK_QUEUE, id);
    const f = flagsOf(p, id);
    if ((f & MARK) != 0) return fail(CHECK_QUEUE, id);
    if ((f & QUEUED) == 0 || refOf(p, id) != 0) return fail(CHECK_QUEUE_MEMBERS, id);
    setFlags(p, id, f | MARK);
    count++;
    prev = id;
    id = nextOf(p, id);
  }
  if (prevOf(p, s) != prev || count != p.numFree) return fail(CHECK_QUEUE, -1);
  let cached = 0;
  for (id = 1; id < n; id++) {
    const f = flagsOf(p, id);
    const r = refOf(p, id);
    if (r < 0) return fail(CHECK_LOST, id);
    if ((f & MARK) == 0 && (r == 0 || (f & QUEUED) != 0)) return fail(CHECK_QUEUE_MEMBERS, id);
    if ((f & KEYED) != 0) {
      cached++;
      // Its key leads to the oldest block of its chain, and the chain holds it, all under one key.
      const key = rec(p, id) + R_KEY;
      const first = lookupKey(p, key);
      if (first < 0) return fail(CHECK_KEYS, id);
      if ((f & DUPS) == 0) {
        if (first != id) return fail(CHECK_KEYS, id);
        continue;
      }
      let b = first;
      let found = false;
      let steps = 0;
      do {
        if (<u32>(b - 1) >= <u32>(n - 1) || (flagsOf(p, b) & (KEYED | DUPS)) != (KEYED | DUPS) || !sameKey(rec(p, b) + R_KEY, key) || older(p, newer(p, b)) != b) return fail(CHECK_KEYS, id);
        if (b == id) found = true;
        b = newer(p, b);
        if (++steps > n) return fail(CHECK_KEYS, id);
      } while (b != first);
      if (!found || steps < 2) return fail(CHECK_KEYS, id);
    } else if ((f & DUPS) != 0) {
      return fail(CHECK_KEYS, id);
    }
  }
  if (cached != p.numCached) return fail(CHECK_CACHED, -1);
  // The table: each entry a keyed block's, under its key's tag, found from its home; the overflow counts add up.
  let entries = 0;
  let passed: u64 = 0;
  const nb = p.bucketMask + 1;
  for (let b: u32 = 0; b < nb; b++) {
    const a = bucket(p, b);
    for (let lane: usize = 0; lane < 15; lane++) {
      const e = load<u32>(a + (lane << 2));
      const bid = <i32>(e & ~p.tagMask);
      if (bid == 0) {
        if (e != 0) return fail(CHECK_KEYS, -1);
        continue;
      }
      if (<u32>(bid - 1) >= <u32>(n - 1) || (flagsOf(p, bid) & KEYED) == 0) return fail(CHECK_KEYS, bid);
      const key = rec(p, bid) + R_KEY;
      const fp = fingerprint(key);
      if ((fp & p.tagMask) != (e & p.tagMask) || lookupKey(p, key) != bid) return fail(CHECK_KEYS, bid);
      for (let h = fp & p.bucketMask; h != b; h = (h + 1) & p.bucketMask) {
        if (load<u32>(bucket(p, h), CTRL) == 0) return fail(CHECK_KEYS, bid);
        passed++;
      }
      entries++;
    }
  }
  let counted: u64 = 0;
  for (let b: u32 = 0; b < nb; b++) counted += <u64>load<u32>(bucket(p, b), CTRL);
  if (counted != passed || entries != p.numKeys) return fail(CHECK_KEYS, -1);
  return 0;
}

/** Each block's references equal `counts[id]` (i32 per block: how many request tables hold it); 0 or CHECK_HOLDERS. */
export function poolCheckHolders(p: VllmPool, counts: usize): i32 {
  for (let id = 1; id < p.numBlocks; id++) {
    if (refOf(p, id) != load<i32>(counts + (<usize>id << 2))) return fail(CHECK_HOLDERS, id);
  }
  return 0;
}
