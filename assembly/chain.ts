// Block-chain hashing over int32 tokens already in linear memory.
//
// A block's hash is XXH3-128(seed, parent's 16 bytes ++ the block's tokens as
// little-endian int32), or XXH3-128(seed, tokens) for a block with no parent.
// The parent's bytes are not copied next to the block: the caller guarantees
// 16 writable bytes right before `tokens`, which are saved, overwritten with
// the parent hash for the duration of the hash, and restored.

import { hash128, resultLo, resultHi } from "./xxh3";

/**
 * out = XXH3-128(seed, parent[0..16) ++ bytes at tokens), or of the tokens
 * alone when parent == 0. Needs 16 writable bytes before `tokens` when parent
 * != 0; `parent` must not point into them (it may equal a previous `out`).
 * `out` may be anywhere, the 16 bytes before `tokens` included.
 */
export function chainHash(tokens: usize, bytes: usize, parent: usize, seed: u64, out: usize): void {
  // 16-byte loads and stores throughout: the next block reads this block's
  // `out` as its parent, and a 16-byte load forwards from a 16-byte store
  // (not from two 8-byte ones).
  if (parent == 0) {
    hash128(tokens, bytes, seed);
  } else {
    const head = tokens - 16;
    const saved = v128.load(head);
    v128.store(head, v128.load(parent));
    hash128(head, bytes + 16, seed);
    v128.store(head, saved);
  }
  v128.store(out, i64x2.replace_lane(i64x2.splat(<i64>resultLo), 1, <i64>resultHi));
}

/**
 * Hashes floor(numTokens / blockSize) full blocks of int32 tokens, each chained
 * on the previous block's hash (block 0 on `parent`, or alone when parent == 0).
 * Writes 16 bytes per block at out + 16*b and returns the number of blocks.
 * Needs 16 writable bytes before `tokens` when parent != 0.
 */
export function hashBlocksInto(tokens: usize, numTokens: i32, blockSize: i32, parent: usize, seed: u64, out: usize): i32 {
  if (blockSize <= 0 || numTokens <= 0) return 0;
  const n = numTokens / blockSize;
  const blockBytes = <usize>blockSize << 2;
  let t = tokens;
  let o = out;
  let prev = parent;
  for (let b = 0; b < n; b++) {
    chainHash(t, blockBytes, prev, seed, o);
    prev = o;
    t += blockBytes;
    o += 16;
  }
  return n;
}
