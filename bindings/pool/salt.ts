// Cache salts (tenant isolation). A salt's XXH3-128 digest stands in as the
// parent hash of a sequence's first block, so the salt reaches every block
// of the chain through block 0 alone, and a sequence without salt keeps the
// unsalted chain bit for bit.

import { xxh3_128 } from '../hash.js';

const utf8 = new TextEncoder();

/** The 16-byte digest of `salt` (XXH3-128 of its UTF-8 bytes with the pool's seed). */
export function saltKey(salt: string, seed: number | bigint): Uint8Array {
  return xxh3_128(utf8.encode(salt), seed);
}
