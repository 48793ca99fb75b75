// Public hashing API: XXH3-128 (bit-identical to xxHash's
// XXH3_128bits_withSeed) and the chained block hashes of token sequences.

import { plainCore } from './core/plain-core.js';

const TWO_32 = 0x1_0000_0000;
const U64_END = 1n << 64n;
const INT32_MIN = -0x8000_0000;
const INT32_MAX = 0x7fff_ffff;

function show(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'object') return Object.prototype.toString.call(value);
  return String(value);
}

/** Validates a 64-bit seed and splits it into [lo, hi] u32 halves. */
function seedHalves(fn: string, seed: unknown): [number, number] {
  if (typeof seed === 'number') {
    if (!Number.isSafeInteger(seed) || seed < 0) {
      throw new RangeError(`${fn}: seed must be an integer in [0, 2^64) (a safe integer when a number), got ${show(seed)}`);
    }
    return [seed % TWO_32, Math.floor(seed / TWO_32)];
  }
  if (typeof seed === 'bigint') {
    if (seed < 0n || seed >= U64_END) {
      throw new RangeError(`${fn}: seed must be an integer in [0, 2^64), got ${show(seed)}`);
    }
    return [Number(seed & 0xffff_ffffn), Number(seed >> 32n)];
  }
  throw new TypeError(`${fn}: seed must be a number or a bigint, got ${show(seed)}`);
}

/**
 * XXH3-128 of `data` with `seed` (xxHash's `XXH3_128bits_withSeed`).
 *
 * @param data  the bytes to hash
 * @param seed  an integer in [0, 2^64): a safe integer or a bigint (default 0)
 * @returns 16 bytes: the low 64 bits little-endian, then the high 64 bits
 *   little-endian (the in-memory layout of `XXH128_hash_t` on little-endian
 *   machines; note xxHash's canonical form is big-endian, high half first)
 */
export function xxh3_128(data: Uint8Array, seed: number | bigint = 0): Uint8Array {
  if (!(data instanceof Uint8Array)) {
    throw new TypeError(`xxh3_128: data must be a Uint8Array, got ${show(data)}`);
  }
  const [lo, hi] = seedHalves('xxh3_128', seed);
  const len = data.length;
  const rt = plainCore();
  const ptr = rt.staging.byteSpace(len + 16); // input, then the 16-byte result
  const out = ptr + len;
  rt.u8.set(data, ptr); // read the views only after staging: staging may grow memory
  rt.ex.hash_xxh3_128(ptr, len, lo, hi, out);
  return rt.u8.slice(out, out + 16);
}

/**
 * Chained hashes of the full blocks of a token sequence: block b covers tokens
 * [b*blockSize, (b+1)*blockSize); block 0 hashes XXH3-128(seed, tokens as
 * little-endian int32), block b > 0 hashes XXH3-128(seed, hash of block b-1 ++
 * its tokens). A trailing partial block is not hashed.
 *
 * @param tokens     int32 token ids
 * @param blockSize  tokens per block, an integer >= 1
 * @param seed       an integer in [0, 2^64) (default 1024, as in xLLM)
 * @returns 16 bytes per full block (each as returned by {@link xxh3_128})
 */
export function hashBlocks(
  tokens: Int32Array | ArrayLike<number>,
  blockSize: number,
  seed: number | bigint = 1024,
): Uint8Array {
  if (tokens === null || typeof tokens !== 'object' || typeof (tokens as ArrayLike<number>).length !== 'number') {
    throw new TypeError(`hashBlocks: tokens must be an Int32Array or an array of int32 token ids, got ${show(tokens)}`);
  }
  if (!(tokens instanceof Int32Array)) {
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (typeof t !== 'number' || !Number.isInteger(t) || t < INT32_MIN || t > INT32_MAX) {
        throw new RangeError(`hashBlocks: tokens[${i}] must be an integer in int32 range [-2^31, 2^31), got ${show(t)}`);
      }
    }
  }
  if (typeof blockSize !== 'number' || !Number.isInteger(blockSize) || blockSize < 1) {
    const E = typeof blockSize === 'number' ? RangeError : TypeError;
    throw new E(`hashBlocks: blockSize must be an integer >= 1, got ${show(blockSize)}`);
  }
  const [lo, hi] = seedHalves('hashBlocks', seed);
  const n = Math.floor(tokens.length / blockSize);
  if (n === 0) return new Uint8Array(0);
  const numTokens = n * blockSize;
  // Tokens first, then the result area: they are separate staging regions, so
  // growing the second refreshes the views but leaves the first pointer valid.
  const rt = plainCore();
  const tp = rt.staging.stageTokens(tokens, 0, numTokens);
  const out = rt.staging.byteSpace(16 * n);
  rt.ex.hash_blocks(tp, numTokens, blockSize, lo, hi, out);
  return rt.u8.slice(out, out + 16 * n);
}
