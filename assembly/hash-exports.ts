// Hash exports (XXH3-128 and block chains). Only i32 arguments cross the
// boundary: 64-bit seeds arrive as two u32 halves.

import { xxh3_128 } from "./xxh3";
import { hashBlocksInto } from "./chain";

/** XXH3_128bits_withSeed of [ptr, ptr+len) -> 16 bytes at out (low64 LE, high64 LE). */
export function hash_xxh3_128(ptr: usize, len: usize, seedLo: u32, seedHi: u32, out: usize): void {
  xxh3_128(ptr, len, (<u64>seedHi << 32) | <u64>seedLo, out);
}

/**
 * Chained hashes of the floor(numTokens / blockSize) full blocks of int32
 * tokens at `tokens` (no parent) -> 16 bytes per block at out; returns the count.
 */
export function hash_blocks(tokens: usize, numTokens: i32, blockSize: i32, seedLo: u32, seedHi: u32, out: usize): i32 {
  return hashBlocksInto(tokens, numTokens, blockSize, 0, (<u64>seedHi << 32) | <u64>seedLo, out);
}

/**
 * Like hash_blocks, with block 0 chained on the 16 bytes at `parent` (a cache
 * salt's digest), or on nothing when parent == 0.
 */
export function hash_blocks_from(tokens: usize, numTokens: i32, blockSize: i32, seedLo: u32, seedHi: u32, parent: usize, out: usize): i32 {
  return hashBlocksInto(tokens, numTokens, blockSize, parent, (<u64>seedHi << 32) | <u64>seedLo, out);
}
