// XXH3-128 with a seed, bit-identical to xxHash's XXH3_128bits_withSeed
// (xxHash >= 0.8.0; the algorithm is frozen). Written from the specification
// in xxHash's doc/xxhash_spec.md.
//
// Runtime "stub": nothing here allocates. The default secret and the secret
// derived from the last seed seen by the long path are static data; results
// travel through two globals so callers (see chain.ts) can finish their own
// bookkeeping before storing them.
//
// Wasm has no 64x64->128 multiply: the high half is built from 32-bit halves.
// The long path (> 240 bytes) accumulates with 128-bit SIMD, two 64-bit
// accumulator lanes per vector.

import { alloc } from "./heap";

// ---------------------------------------------------------------- constants

const PRIME32_1: u64 = 0x9e3779b1;
const PRIME32_2: u64 = 0x85ebca77;
const PRIME32_3: u64 = 0xc2b2ae3d;
const PRIME64_1: u64 = 0x9e3779b185ebca87;
const PRIME64_2: u64 = 0xc2b2ae3d27d4eb4f;
const PRIME64_3: u64 = 0x165667b19e3779f9;
const PRIME64_4: u64 = 0x85ebca77c2b2ae63;
const PRIME64_5: u64 = 0x27d4eb2f165667c5;
const PRIME_MX1: u64 = 0x165667919e3779f9;
const PRIME_MX2: u64 = 0x9fb21c651e98df25;

const SECRET_SIZE: usize = 192;
const MIDSIZE_MAX: usize = 240;
const STRIPE_LEN: usize = 64;
const STRIPES_PER_BLOCK: usize = (SECRET_SIZE - STRIPE_LEN) / 8; // 16
const BLOCK_LEN: usize = STRIPE_LEN * STRIPES_PER_BLOCK; // 1024

/** The default 192-byte secret (kSecret). */
const K_SECRET: usize = memory.data<u8>([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
], 16);

/**
 * Secret derived from `derivedSeed` (XXH3_initCustomSecret); valid when
 * derivedSeed != 0. Per instance (thread) in the shared-memory build.
 */
const DERIVED: usize = ASC_FEATURE_THREADS ? alloc(SECRET_SIZE) : memory.data(<i32>SECRET_SIZE, 16);
let derivedSeed: u64 = 0;

/** This instance's derived-secret region (the shared build gives it back when a thread leaves). */
export function derivedSecret(): usize {
  return DERIVED;
}

/** Result of the last hash128() call. */
export let resultLo: u64 = 0;
export let resultHi: u64 = 0;

// ---------------------------------------------------------------- helpers

/** High 64 bits of the 128-bit product a * b. */
// @ts-ignore: decorator
@inline function mulHi(a: u64, b: u64): u64 {
  const aL = a & 0xffffffff;
  const aH = a >> 32;
  const bL = b & 0xffffffff;
  const bH = b >> 32;
  const ll = aL * bL;
  const lh = aL * bH;
  const hl = aH * bL;
  const hh = aH * bH;
  const cross = (ll >> 32) + (lh & 0xffffffff) + hl; // cannot overflow
  return hh + (lh >> 32) + (cross >> 32);
}

/** Low and high halves of a * b, xor-ed (XXH3_mul128_fold64). */
// @ts-ignore: decorator
@inline function fold64(a: u64, b: u64): u64 {
  return (a * b) ^ mulHi(a, b);
}

// @ts-ignore: decorator
@inline function avalanche(h: u64): u64 {
  h ^= h >> 37;
  h *= PRIME_MX1;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline function avalancheXXH64(h: u64): u64 {
  h ^= h >> 33;
  h *= PRIME64_2;
  h ^= h >> 29;
  h *= PRIME64_3;
  return h ^ (h >> 32);
}

// ---------------------------------------------------------------- 0..16 bytes

function hashShort(p: usize, len: usize, seed: u64): void {
  const s = K_SECRET;
  if (len > 8) {
    const bitflipl = (load<u64>(s, 32) ^ load<u64>(s, 40)) - seed;
    const bitfliph = (load<u64>(s, 48) ^ load<u64>(s, 56)) + seed;
    const inLo = load<u64>(p);
    let inHi = load<u64>(p + len - 8);
    const k = inLo ^ inHi ^ bitflipl;
    let mLo = k * PRIME64_1;
    let mHi = mulHi(k, PRIME64_1);
    mLo += <u64>(len - 1) << 54;
    inHi ^= bitfliph;
    mHi += inHi + (inHi & 0xffffffff) * (PRIME32_2 - 1);
    mLo ^= bswap<u64>(mHi);
    const hLo = mLo * PRIME64_2;
    const hHi = mulHi(mLo, PRIME64_2) + mHi * PRIME64_2;
    resultLo = avalanche(hLo);
    resultHi = avalanche(hHi);
  } else if (len >= 4) {
    seed ^= (<u64>bswap<u32>(<u32>seed)) << 32;
    const inLo = <u64>load<u32>(p);
    const inHi = <u64>load<u32>(p + len - 4);
    const input64 = inLo + (inHi << 32);
    const bitflip = (load<u64>(s, 16) ^ load<u64>(s, 24)) + seed;
    const keyed = input64 ^ bitflip;
    const m = PRIME64_1 + (<u64>len << 2);
    let mLo = keyed * m;
    let mHi = mulHi(keyed, m);
    mHi += mLo << 1;
    mLo ^= mHi >> 3;
    mLo ^= mLo >> 35;
    mLo *= PRIME_MX2;
    mLo ^= mLo >> 28;
    resultLo = mLo;
    resultHi = avalanche(mHi);
  } else if (len > 0) {
    const c1 = <u32>load<u8>(p);
    const c2 = <u32>load<u8>(p + (len >> 1));
    const c3 = <u32>load<u8>(p + len - 1);
    const combinedl: u32 = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8);
    const combinedh: u32 = rotl<u32>(bswap<u32>(combinedl), 13);
    const bitflipl = <u64>(load<u32>(s) ^ load<u32>(s, 4)) + seed;
    const bitfliph = <u64>(load<u32>(s, 8) ^ load<u32>(s, 12)) - seed;
    resultLo = avalancheXXH64(<u64>combinedl ^ bitflipl);
    resultHi = avalancheXXH64(<u64>combinedh ^ bitfliph);
  } else {
    resultLo = avalancheXXH64(seed ^ (load<u64>(s, 64) ^ load<u64>(s, 72)));
    resultHi = avalancheXXH64(seed ^ (load<u64>(s, 80) ^ load<u64>(s, 88)));
  }
}

// ---------------------------------------------------------------- 17..240 bytes

// The two 64-bit accumulators of the mid-size paths live in one vector
// [lo, hi], and the two 64x64->128 multiplies of an XXH128_mix32B step run
// side by side on 32-bit halves (i64x2.extmul), so a step is straight SIMD.

const MASK32: v128 = i64x2(0xffffffff, 0xffffffff);

/**
 * XXH128_mix32B: acc.lo += mix16B(in1, s, seed), acc.lo ^= in2[0] + in2[1];
 * acc.hi += mix16B(in2, s + 16, seed), acc.hi ^= in1[0] + in1[1].
 * `seedv` is [seed, -seed].
 */
// @ts-ignore: decorator
@inline function mix32B(acc: v128, in1: usize, in2: usize, s: usize, seedv: v128): v128 {
  return mix32Bv(acc, v128.load(in1), v128.load(in2), s, seedv);
}

/** mix32B over the 16 input bytes at in1 and in2 already loaded: x and y. */
// @ts-ignore: decorator
@inline function mix32Bv(acc: v128, x: v128, y: v128, s: usize, seedv: v128): v128 {
  const k1 = v128.xor(x, i64x2.add(v128.load(s), seedv)); // [a1, b1]: mix16B(in1) multiplies a1 * b1
  const k2 = v128.xor(y, i64x2.add(v128.load(s, 16), seedv)); // [a2, b2]
  const sums = i64x2.add(i64x2.shuffle(y, x, 0, 2), i64x2.shuffle(y, x, 1, 3)); // [y0 + y1, x0 + x1]
  return v128.xor(i64x2.add(acc, fold64x2(k1, k2)), sums);
}

/** [fold64(a1, b1), fold64(a2, b2)] of k1 = [a1, b1] and k2 = [a2, b2]. */
// @ts-ignore: decorator
@inline function fold64x2(k1: v128, k2: v128): v128 {
  const a = i32x4.shuffle(k1, k2, 0, 4, 1, 5); // [a1.lo, a2.lo, a1.hi, a2.hi]
  const b = i32x4.shuffle(k1, k2, 2, 6, 3, 7); // [b1.lo, b2.lo, b1.hi, b2.hi]
  const bs = i32x4.shuffle(b, b, 2, 3, 0, 1); // [b1.hi, b2.hi, b1.lo, b2.lo]
  const ll = i64x2.extmul_low_i32x4_u(a, b);
  const hh = i64x2.extmul_high_i32x4_u(a, b);
  const lh = i64x2.extmul_low_i32x4_u(a, bs);
  const hl = i64x2.extmul_high_i32x4_u(a, bs);
  const cross = i64x2.add(i64x2.add(i64x2.shr_u(ll, 32), v128.and(lh, MASK32)), hl);
  const hi = i64x2.add(i64x2.add(hh, i64x2.shr_u(lh, 32)), i64x2.shr_u(cross, 32));
  const lo = v128.or(i64x2.shl(cross, 32), v128.and(ll, MASK32));
  return v128.xor(lo, hi);
}

// @ts-ignore: decorator
@inline function finishMid(acc: v128, len: usize, seed: u64): void {
  const lo = <u64>i64x2.extract_lane(acc, 0);
  const hi = <u64>i64x2.extract_lane(acc, 1);
  resultLo = avalanche(lo + hi);
  resultHi = 0 - avalanche(lo * PRIME64_1 + hi * PRIME64_4 + (<u64>len - seed) * PRIME64_2);
}

function hash17to128(p: usize, len: usize, seed: u64): void {
  const s = K_SECRET;
  const seedv = i64x2(<i64>seed, <i64>(0 - seed));
  let acc = i64x2(<i64>(<u64>len * PRIME64_1), 0);
  const e = p + len;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) acc = mix32B(acc, p + 48, e - 64, s + 96, seedv);
      acc = mix32B(acc, p + 32, e - 48, s + 64, seedv);
    }
    acc = mix32B(acc, p + 16, e - 32, s + 32, seedv);
  }
  acc = mix32B(acc, p, e - 16, s, seedv);
  finishMid(acc, len, seed);
}

/**
 * Chained block hashes, as chainHash computes them one at a time, for blocks
 * of `bytes` bytes with 32 <= bytes <= 112 (8 to 28 int32 tokens): block b
 * hashes out[b - 1] ++ its bytes (block 0: the 16 bytes at `parent`). The
 * input is 48-128 bytes, the 17-128 class, where only the last mix step
 * reads the first 16 bytes, and of that step only the low lane's multiply
 * and the finish depend on them. Everything else depends on the block's
 * tokens alone, so the CPU overlaps it with the previous block's dependent
 * tail; that tail, from one block's hash to the next one's, is the cost
 * of a run. It is kept scalar (~27 cycles): run through the vector lanes,
 * with a lane extract, shuffles and a lane insert on the way, it took ~40.
 * No bytes before `tokens` are touched.
 */
export function chainRun(tokens: usize, bytes: usize, n: i32, parent: usize, seed: u64, out: usize): void {
  const s = K_SECRET;
  const seedv = i64x2(<i64>seed, <i64>(0 - seed));
  const len = bytes + 16;
  const acc0 = i64x2(<i64>(<u64>len * PRIME64_1), 0);
  // mix16B of the parent: (parent.lo ^ (s[0] + seed)) x (parent.hi ^ (s[8] - seed)).
  const k0 = load<u64>(s) + seed;
  const k1 = load<u64>(s, 8) - seed;
  // mix16B of the last 16 token bytes, for the high accumulator.
  const k2 = load<u64>(s, 16) + seed;
  const k3 = load<u64>(s, 24) - seed;
  const tail = (<u64>len - seed) * PRIME64_2;
  let parLo = load<u64>(parent);
  let parHi = load<u64>(parent, 8);
  for (let b = 0; b < n; b++) {
    const p = tokens + <usize>b * bytes - 16; // where the parent would sit; never read
    const e = p + len;
    let acc = acc0;
    if (len > 64) {
      if (len > 96) acc = mix32B(acc, p + 48, e - 64, s + 96, seedv);
      acc = mix32B(acc, p + 32, e - 48, s + 64, seedv);
    }
    acc = mix32B(acc, p + 16, e - 32, s + 32, seedv);
    // The last step, mix32B(acc, parent, e - 16), lane by lane.
    const t0 = load<u64>(e - 16);
    const t1 = load<u64>(e - 8);
    const accLo = <u64>i64x2.extract_lane(acc, 0);
    const accHi = <u64>i64x2.extract_lane(acc, 1) + fold64(t0 ^ k2, t1 ^ k3);
    const lo = (accLo + fold64(parLo ^ k0, parHi ^ k1)) ^ (t0 + t1);
    const hi = accHi ^ (parLo + parHi);
    // finishMid, in locals: the result globals would put a store and a
    // reload on the chain from one block to the next.
    parLo = avalanche(lo + hi);
    parHi = 0 - avalanche(lo * PRIME64_1 + hi * PRIME64_4 + tail);
    const o = out + (<usize>b << 4);
    store<u64>(o, parLo);
    store<u64>(o, parHi, 8);
  }
}

/**
 * chainRun for 64-byte blocks (16 int32 tokens; len 80), two blocks a turn:
 * the run is bound by instruction throughput, not by the chain from one
 * block to the next (two independent runs interleaved gain ~8%), so what
 * pays is fewer instructions per block. The mix steps' addresses are fixed
 * (the 32-byte step with secret offset 64 reads tokens 4..7 twice), and
 * the two blocks' token-only multiply of the last step, which chainRun
 * makes scalar, share one vector. ~12% fewer cycles a block than chainRun.
 */
export function chainRun64(tokens: usize, n: i32, parent: usize, seed: u64, out: usize): void {
  const s = K_SECRET;
  const seedv = i64x2(<i64>seed, <i64>(0 - seed));
  const acc0 = i64x2(<i64>(80 * PRIME64_1), 0);
  const k0 = load<u64>(s) + seed;
  const k1 = load<u64>(s, 8) - seed;
  const kTail = i64x2.add(v128.load(s, 16), seedv);
  const tail = (80 - seed) * PRIME64_2;
  let parLo = load<u64>(parent);
  let parHi = load<u64>(parent, 8);
  const end = tokens + (<usize>(n & ~1) << 6);
  let o = out;
  for (let p = tokens; p < end; p += 128, o += 32) {
    const a3 = v128.load(p, 48);
    const b3 = v128.load(p, 112);
    const accA = mix32Bv(mix32Bv(acc0, v128.load(p, 16), v128.load(p, 16), s + 64, seedv), v128.load(p), v128.load(p, 32), s + 32, seedv);
    const accB = mix32Bv(mix32Bv(acc0, v128.load(p, 80), v128.load(p, 80), s + 64, seedv), v128.load(p, 64), v128.load(p, 96), s + 32, seedv);
    // [mix16B of block A's last 16 bytes, of block B's], and their two u64 sums.
    const f = fold64x2(v128.xor(a3, kTail), v128.xor(b3, kTail));
    const sums = i64x2.add(i64x2.shuffle(a3, b3, 0, 2), i64x2.shuffle(a3, b3, 1, 3));
    let lo = (<u64>i64x2.extract_lane(accA, 0) + fold64(parLo ^ k0, parHi ^ k1)) ^ <u64>i64x2.extract_lane(sums, 0);
    let hi = (<u64>i64x2.extract_lane(accA, 1) + <u64>i64x2.extract_lane(f, 0)) ^ (parLo + parHi);
    parLo = avalanche(lo + hi);
    parHi = 0 - avalanche(lo * PRIME64_1 + hi * PRIME64_4 + tail);
    store<u64>(o, parLo);
    store<u64>(o, parHi, 8);
    lo = (<u64>i64x2.extract_lane(accB, 0) + fold64(parLo ^ k0, parHi ^ k1)) ^ <u64>i64x2.extract_lane(sums, 1);
    hi = (<u64>i64x2.extract_lane(accB, 1) + <u64>i64x2.extract_lane(f, 1)) ^ (parLo + parHi);
    parLo = avalanche(lo + hi);
    parHi = 0 - avalanche(lo * PRIME64_1 + hi * PRIME64_4 + tail);
    store<u64>(o, parLo, 16);
    store<u64>(o, parHi, 24);
  }
  // An odd last block, chained on the block before it (or on `parent`).
  if ((n & 1) != 0) chainRun(end, 64, 1, n > 1 ? o - 16 : parent, seed, o);
}

function hash129to240(p: usize, len: usize, seed: u64): void {
  const s = K_SECRET;
  const seedv = i64x2(<i64>seed, <i64>(0 - seed));
  let acc = i64x2(<i64>(<u64>len * PRIME64_1), 0);
  acc = mix32B(acc, p, p + 16, s, seedv);
  acc = mix32B(acc, p + 32, p + 48, s + 32, seedv);
  acc = mix32B(acc, p + 64, p + 80, s + 64, seedv);
  acc = mix32B(acc, p + 96, p + 112, s + 96, seedv);
  acc = i64x2(<i64>avalanche(<u64>i64x2.extract_lane(acc, 0)), <i64>avalanche(<u64>i64x2.extract_lane(acc, 1)));
  // Full 32-byte chunks after the first 128 bytes, secret offset 3 onward.
  for (let i: usize = 160; i <= len; i += 32) {
    const q = p + i - 32;
    acc = mix32B(acc, q, q + 16, s + 3 + i - 160, seedv);
  }
  // The last 32 bytes, halves swapped, negated seed, secret offset 136 - 17 - 16.
  const e = p + len;
  acc = mix32B(acc, e - 16, e - 32, s + 103, i64x2(<i64>(0 - seed), <i64>seed));
  finishMid(acc, len, seed);
}

// ---------------------------------------------------------------- > 240 bytes

/** XXH3_initCustomSecret into DERIVED, skipped when the seed did not change. */
function deriveSecret(seed: u64): usize {
  if (derivedSeed != seed) {
    for (let i: usize = 0; i < SECRET_SIZE; i += 16) {
      store<u64>(DERIVED + i, load<u64>(K_SECRET + i) + seed);
      store<u64>(DERIVED + i, load<u64>(K_SECRET + i, 8) - seed, 8);
    }
    derivedSeed = seed;
  }
  return DERIVED;
}

/**
 * One accumulator vector (lanes 2k, 2k+1) takes 16 bytes of a stripe:
 * acc[i] += lo32(d^s) * hi32(d^s); acc[i^1] += d[i].
 */
// @ts-ignore: decorator
@inline function accumulate16(acc: v128, p: usize, s: usize): v128 {
  const d = v128.load(p);
  const k = v128.xor(d, v128.load(s));
  const lo32 = i32x4.shuffle(k, k, 0, 2, 0, 2);
  const hi32 = i32x4.shuffle(k, k, 1, 3, 1, 3);
  const prod = i64x2.extmul_low_i32x4_u(lo32, hi32);
  const swapped = i64x2.shuffle(d, d, 1, 0);
  return i64x2.add(acc, i64x2.add(prod, swapped));
}

// @ts-ignore: decorator
@inline function scramble16(acc: v128, s: usize): v128 {
  acc = v128.xor(acc, i64x2.shr_u(acc, 47));
  acc = v128.xor(acc, v128.load(s));
  return i64x2.mul(acc, i64x2.splat(PRIME32_1));
}

// @ts-ignore: decorator
@inline function mix2Accs(acc: v128, s: usize): u64 {
  return fold64(i64x2.extract_lane(acc, 0) ^ load<u64>(s), i64x2.extract_lane(acc, 1) ^ load<u64>(s, 8));
}

function hashLong(p: usize, len: usize, seed: u64): void {
  const s = seed == 0 ? K_SECRET : deriveSecret(seed);
  let acc0 = i64x2(<i64>PRIME32_3, <i64>PRIME64_1);
  let acc1 = i64x2(<i64>PRIME64_2, <i64>PRIME64_3);
  let acc2 = i64x2(<i64>PRIME64_4, <i64>PRIME32_2);
  let acc3 = i64x2(<i64>PRIME64_5, <i64>PRIME32_1);

  const nbBlocks = (len - 1) / BLOCK_LEN;
  let q = p;
  for (let b: usize = 0; b < nbBlocks; b++) {
    for (let n: usize = 0; n < STRIPES_PER_BLOCK; n++) {
      const t = s + n * 8;
      acc0 = accumulate16(acc0, q, t);
      acc1 = accumulate16(acc1, q + 16, t + 16);
      acc2 = accumulate16(acc2, q + 32, t + 32);
      acc3 = accumulate16(acc3, q + 48, t + 48);
      q += STRIPE_LEN;
    }
    const t = s + SECRET_SIZE - STRIPE_LEN;
    acc0 = scramble16(acc0, t);
    acc1 = scramble16(acc1, t + 16);
    acc2 = scramble16(acc2, t + 32);
    acc3 = scramble16(acc3, t + 48);
  }
  // Last partial block: every full stripe but the very last one...
  const nbStripes = ((len - 1) - BLOCK_LEN * nbBlocks) / STRIPE_LEN;
  for (let n: usize = 0; n < nbStripes; n++) {
    const t = s + n * 8;
    acc0 = accumulate16(acc0, q, t);
    acc1 = accumulate16(acc1, q + 16, t + 16);
    acc2 = accumulate16(acc2, q + 32, t + 32);
    acc3 = accumulate16(acc3, q + 48, t + 48);
    q += STRIPE_LEN;
  }
  // ...then the last 64 bytes of input, secret offset 192 - 64 - 7.
  {
    const r = p + len - STRIPE_LEN;
    const t = s + SECRET_SIZE - STRIPE_LEN - 7;
    acc0 = accumulate16(acc0, r, t);
    acc1 = accumulate16(acc1, r + 16, t + 16);
    acc2 = accumulate16(acc2, r + 32, t + 32);
    acc3 = accumulate16(acc3, r + 48, t + 48);
  }
  // Merge: low half with the secret at 11, high half at 192 - 64 - 11.
  {
    const t = s + 11;
    let r = <u64>len * PRIME64_1;
    r += mix2Accs(acc0, t);
    r += mix2Accs(acc1, t + 16);
    r += mix2Accs(acc2, t + 32);
    r += mix2Accs(acc3, t + 48);
    resultLo = avalanche(r);
  }
  {
    const t = s + SECRET_SIZE - STRIPE_LEN - 11;
    let r = ~(<u64>len * PRIME64_2);
    r += mix2Accs(acc0, t);
    r += mix2Accs(acc1, t + 16);
    r += mix2Accs(acc2, t + 32);
    r += mix2Accs(acc3, t + 48);
    resultHi = avalanche(r);
  }
}

// ---------------------------------------------------------------- entry points

/** XXH3-128 of [ptr, ptr+len) with `seed`; the result is left in resultLo/resultHi. */
export function hash128(ptr: usize, len: usize, seed: u64): void {
  if (len <= 16) hashShort(ptr, len, seed);
  else if (len <= 128) hash17to128(ptr, len, seed);
  else if (len <= MIDSIZE_MAX) hash129to240(ptr, len, seed);
  else hashLong(ptr, len, seed);
}

/**
 * XXH3_128bits_withSeed of [ptr, ptr+len): low64 little-endian at `out`,
 * high64 at out+8 (the memory layout of XXH128_hash_t).
 */
export function xxh3_128(ptr: usize, len: usize, seed: u64, out: usize): void {
  hash128(ptr, len, seed);
  store<u64>(out, resultLo);
  store<u64>(out, resultHi, 8);
}
