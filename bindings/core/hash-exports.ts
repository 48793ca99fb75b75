// Raw hash exports of the core (see assembly/hash-exports.ts). Seeds cross
// the boundary as two u32 halves; pointers are byte offsets into linear memory.
export interface HashExports {
  /** XXH3_128bits_withSeed of [ptr, ptr+len) -> 16 bytes at out (low64 LE, then high64 LE). */
  hash_xxh3_128(ptr: number, len: number, seedLo: number, seedHi: number, out: number): void;
  /**
   * Chained hashes of the floor(numTokens / blockSize) full blocks of int32
   * tokens at `tokens` -> 16 bytes per block at out; returns the block count.
   * Needs 16 writable bytes before `tokens` (every staging area has them).
   */
  hash_blocks(tokens: number, numTokens: number, blockSize: number, seedLo: number, seedHi: number, out: number): number;
  /** hash_blocks with block 0 chained on the 16 bytes at `parent` (0: none). */
  hash_blocks_from(tokens: number, numTokens: number, blockSize: number, seedLo: number, seedHi: number, parent: number, out: number): number;
}
