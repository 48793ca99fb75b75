// Block-chain hashing over int32 tokens already in linear memory.
//
// A block's hash is XXH3-128(seed, parent's 16 bytes ++ the block's tokens as
// little-endian int32), or XXH3-128(seed, tokens) for a block with no parent.
// The parent's bytes are not copied next to the block: the caller guarantees
// 16 writable bytes right before `tokens`, which are saved, overwritten with
// the parent hash for the duration of the hash, and restored.

import { hash128, resultLo, resultHi, chainRun, chainRun64 } from "./xxh3";

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
  hashChain(tokens, <usize>blockSize << 2, n, parent, seed, out);
  return n;
}

/**
 * out[b] = chain hash of block b of `n` blocks of `bytes` bytes at `tokens`,
 * block 0 chained on `parent` (alone when 0). `out` must not overlap the
 * tokens or the 16 bytes before them. Blocks of 8 to 28 tokens with a parent
 * go through chainRun (the parent kept in a register; 16 tokens: chainRun64);
 * others one by one.
 */
export function hashChain(tokens: usize, bytes: usize, n: i32, parent: usize, seed: u64, out: usize): void {
  if (n <= 0) return;
  let first = 0;
  if (parent == 0) {
    chainHash(tokens, bytes, 0, seed, out);
    parent = out;
    first = 1;
  }
  const t = tokens + <usize>first * bytes;
  const o = out + (<usize>first << 4);
  if (bytes == 64) {
    chainRun64(t, n - first, parent, seed, o);
    return;
  }
  if (bytes >= 32 && bytes <= 112) {
    chainRun(t, bytes, n - first, parent, seed, o);
    return;
  }
  let prev = parent;
  for (let b = 0; b < n - first; b++) {
    const ob = o + (<usize>b << 4);
    chainHash(t + <usize>b * bytes, bytes, prev, seed, ob);
    prev = ob;
  }
}
