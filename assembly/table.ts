// Chain hash -> block id: buckets of one 64-byte line, 16 u32 lanes each.
// Lanes 0..14 hold entries, `(fingerprint & tagMask) | id`: the id in the
// low idBits bits, the fingerprint's top bits above it as a tag (id 0 marks
// an empty lane: the padding block is never cached). Lane 15 counts the
// entries that probed past the bucket because it was full (overflow), so a
// lookup goes on to the next bucket only while that count is not zero.
//
// A lookup compares the tag of all fifteen lanes at once (SIMD) and reads a
// block's full key only on a tag match; a removal finds its lane by the
// exact entry, which the fingerprint kept per id gives, and clears it: no
// probe loop, no backward shift, one line touched. The fingerprint's low
// bits pick the home bucket, and the tag bits are the ones above the id's
// (buckets are at most a sixteenth of the ids, so the two never overlap).
// At most ~0.53 entries per lane (capacity >= 2 x ids, 15 of 16 lanes used):
// a bucket overflows when more than 15 of its expected ~8 keys land in it,
// under 1% of buckets.

import { Manager, hashPtr, META_SHIFT, META_FP, META_HASH } from "./layout";

const LANES_MASK: i32 = 0x7fff; // lanes 0..14
const CTRL: usize = 60; // byte offset of lane 15, the overflow count

@inline function fingerprint(lo: u64): u32 {
  return <u32>(lo ^ (lo >> 32));
}

@inline function bucketAddr(m: Manager, b: u32): usize {
  return m.table + (<usize>b << 6);
}

@inline function fpAddr(m: Manager, id: i32): usize {
  return m.fps + (<usize>id << META_SHIFT);
}

/**
 * Bit i set when lane i (0..14) of four lane comparisons (all ones or all
 * zeros per lane) is true: narrowed to bytes and read with one bitmask,
 * where a bitmask per vector took four, and three shifts and ors to join.
 */
@inline function laneBits(e0: v128, e1: v128, e2: v128, e3: v128): i32 {
  const lo = i16x8.narrow_i32x4_s(e0, e1);
  const hi = i16x8.narrow_i32x4_s(e2, e3);
  return i8x16.bitmask(i8x16.narrow_i16x8_s(lo, hi)) & LANES_MASK;
}

/** Bit i set when lane i (0..14) holds exactly `e`. */
@inline function lanesEqual(a: usize, e: u32): i32 {
  const v = i32x4.splat(<i32>e);
  return laneBits(
    i32x4.eq(v128.load(a), v), i32x4.eq(v128.load(a, 16), v), i32x4.eq(v128.load(a, 32), v), i32x4.eq(v128.load(a, 48), v),
  );
}

/** Bit i set when the tag of lane i (0..14) is `tag` (an empty lane matches tag 0). */
@inline function lanesTagged(a: usize, tagMask: u32, tag: u32): i32 {
  const k = i32x4.splat(<i32>tagMask);
  const t = i32x4.splat(<i32>tag);
  return laneBits(
    i32x4.eq(v128.and(v128.load(a), k), t),
    i32x4.eq(v128.and(v128.load(a, 16), k), t),
    i32x4.eq(v128.and(v128.load(a, 32), k), t),
    i32x4.eq(v128.and(v128.load(a, 48), k), t),
  );
}

/**
 * Reads the home bucket's first lane for each of the `n` 16-byte keys at
 * `keys`, with no branch on what they hold: the reads are independent, so
 * their cache misses overlap, where they came one per key inside a probe.
 * Returns their sum, for the caller to keep (so the reads stay). The
 * header's fields sit in locals: the loop is short, so that more of its
 * reads fit in flight at once.
 */
export function readHomes(m: Manager, keys: usize, n: i32): u32 {
  const table = m.table;
  const bucketMask = m.bucketMask;
  let s: u32 = 0;
  for (let i = 0; i < n; i++) s += load<u32>(table + (<usize>(fingerprint(load<u64>(keys + (<usize>i << 4))) & bucketMask) << 6));
  return s;
}

/** readHomes for the `n` cached ids at `ids` (their home from the fingerprint kept per id). */
export function readHomesOf(m: Manager, ids: usize, n: i32): u32 {
  const table = m.table;
  const bucketMask = m.bucketMask;
  const fps = m.fps;
  let s: u32 = 0;
  for (let i = 0; i < n; i++) {
    const id = load<i32>(ids + (<usize>i << 2));
    s += load<u32>(table + (<usize>(load<u32>(fps + (<usize>id << META_SHIFT)) & bucketMask) << 6));
  }
  return s;
}

/** Home bucket of the key the last tableFind did not find (an insert after the miss starts there). */
let missHome: u32 = 0;

/**
 * The cached id whose chain hash is the 16 bytes at `key`, or 0.
 */
export function tableFind(m: Manager, key: usize): i32 {
  const lo = load<u64>(key);
  const hi = load<u64>(key, 8);
  const fp = fingerprint(lo);
  const tagMask = m.tagMask;
  const tag = fp & tagMask;
  const idMask = ~tagMask;
  const bucketMask = m.bucketMask;
  let b = fp & bucketMask;
  missHome = b;
  while (true) {
    const a = bucketAddr(m, b);
    let bits = lanesTagged(a, tagMask, tag);
    while (bits != 0) {
      const id = <i32>(load<u32>(a + (<usize>ctz(bits) << 2)) & idMask);
      if (id != 0) {
        const h = hashPtr(m, id);
        if (load<u64>(h) == lo && load<u64>(h, 8) == hi) return id;
      }
      bits &= bits - 1;
    }
    if (load<u32>(a, CTRL) == 0) return 0;
    b = (b + 1) & bucketMask;
  }
}

/**
 * tableFind of the 16-byte hash at `key`; on a miss, when `addId` is not 0,
 * adds `addId` under that hash (storing its fingerprint; the caller stores
 * the hash in its record) and returns 0. In the common case -- the home
 * bucket has not overflowed -- the bucket's line is loaded once for both
 * the tag compare and the free lane. The table's header fields come as
 * arguments: a loop reads them once (the compilers cannot keep header
 * fields in registers across stores to linear memory, which might alias them).
 * `records`: the base of the per-id records (a caching manager's m.refs),
 * where the keys and fingerprints are.
 */
@inline export function tableFindOrAdd(
  m: Manager, table: usize, bucketMask: u32, tagMask: u32, records: usize, key: usize, addId: i32,
): i32 {
  const lo = load<u64>(key);
  const hi = load<u64>(key, 8);
  const fp = fingerprint(lo);
  const a = table + (<usize>(fp & bucketMask) << 6);
  if (load<u32>(a, CTRL) != 0) {
    // Overflowed home: the general probe, then the general insert.
    const found = tableFind(m, key);
    if (found == 0 && addId != 0) {
      store<u32>(records + (<usize>addId << META_SHIFT), fp, META_FP);
      place(m, missHome, (fp & tagMask) | <u32>addId);
    }
    return found;
  }
  const v0 = v128.load(a);
  const v1 = v128.load(a, 16);
  const v2 = v128.load(a, 32);
  const v3 = v128.load(a, 48);
  const k = i32x4.splat(<i32>tagMask);
  const tv = i32x4.splat(<i32>(fp & tagMask));
  let bits = laneBits(
    i32x4.eq(v128.and(v0, k), tv), i32x4.eq(v128.and(v1, k), tv), i32x4.eq(v128.and(v2, k), tv), i32x4.eq(v128.and(v3, k), tv),
  );
  const idMask = ~tagMask;
  while (bits != 0) {
    const id = <i32>(load<u32>(a + (<usize>ctz(bits) << 2)) & idMask);
    if (id != 0) {
      const h = records + (<usize>id << META_SHIFT);
      if (load<u64>(h, META_HASH) == lo && load<u64>(h, META_HASH + 8) == hi) return id;
    }
    bits &= bits - 1;
  }
  if (addId != 0) {
    store<u32>(records + (<usize>addId << META_SHIFT), fp, META_FP);
    const e = (fp & tagMask) | <u32>addId;
    const z = i32x4.splat(0);
    const free = laneBits(i32x4.eq(v0, z), i32x4.eq(v1, z), i32x4.eq(v2, z), i32x4.eq(v3, z));
    if (free != 0) store<u32>(a + (<usize>ctz(free) << 2), e);
    else place(m, fp & bucketMask, e);
  }
  return 0;
}

/** Puts entry `e` in the first free lane from bucket `b` on, counting the full buckets passed. */
@inline function place(m: Manager, b: u32, e: u32): void {
  const bucketMask = m.bucketMask;
  while (true) {
    const a = bucketAddr(m, b);
    const free = lanesEqual(a, 0);
    if (free != 0) {
      store<u32>(a + (<usize>ctz(free) << 2), e);
      return;
    }
    store<u32>(a, load<u32>(a, CTRL) + 1, CTRL);
    b = (b + 1) & bucketMask;
  }
}

/** Adds `id` under the hash already stored in its record (the key must be absent). */
export function tableInsert(m: Manager, id: i32): void {
  const fp = fingerprint(load<u64>(hashPtr(m, id)));
  store<u32>(fpAddr(m, id), fp);
  place(m, fp & m.bucketMask, (fp & m.tagMask) | <u32>id);
}

/** Removes the `n` ids at `ids` (each must be present; the order does not matter), the header's fields in locals. */
export function tableRemoveAll(m: Manager, ids: usize, n: i32): void {
  const table = m.table;
  const bucketMask = m.bucketMask;
  const tagMask = m.tagMask;
  const fps = m.fps;
  for (let i = 0; i < n; i++) {
    const id = load<i32>(ids + (<usize>i << 2));
    const fp = load<u32>(fps + (<usize>id << META_SHIFT));
    const e = (fp & tagMask) | <u32>id;
    let b = fp & bucketMask;
    while (true) {
      const a = table + (<usize>b << 6);
      const bits = lanesEqual(a, e);
      if (bits != 0) {
        store<u32>(a + (<usize>ctz(bits) << 2), 0);
        break;
      }
      store<u32>(a, load<u32>(a, CTRL) - 1, CTRL);
      b = (b + 1) & bucketMask;
    }
  }
}

/**
 * Audit: number of entries, or -1 if some entry is wrong or unreachable from
 * its home bucket, or the overflow counts do not add up to the buckets the
 * entries probed past.
 */
export function tableCount(m: Manager): i32 {
  let n = 0;
  let passed: u64 = 0;
  const nb = m.bucketMask + 1;
  for (let b: u32 = 0; b < nb; b++) {
    const a = bucketAddr(m, b);
    for (let lane: usize = 0; lane < 15; lane++) {
      const e = load<u32>(a + (lane << 2));
      const id = <i32>(e & ~m.tagMask);
      if (id == 0) {
        if (e != 0) return -1;
        continue;
      }
      if (id < 0 || id >= m.numBlocks) return -1;
      const fp = fingerprint(load<u64>(hashPtr(m, id)));
      if (load<u32>(fpAddr(m, id)) != fp || (fp & m.tagMask) != (e & m.tagMask)) return -1;
      if (tableFind(m, hashPtr(m, id)) != id) return -1;
      // Every bucket from home up to this one (excluded) counts the entry.
      for (let h = fp & m.bucketMask; h != b; h = (h + 1) & m.bucketMask) {
        if (load<u32>(bucketAddr(m, h), CTRL) == 0) return -1;
        passed++;
      }
      n++;
    }
  }
  let counted: u64 = 0;
  for (let b: u32 = 0; b < nb; b++) counted += <u64>load<u32>(bucketAddr(m, b), CTRL);
  return counted == passed ? n : -1;
}
