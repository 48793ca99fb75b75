// The model's block key: SHA-1 of (parent key, tokens).
//
// Deliberately not XXH3: the model shares no code or algorithm with the core.
// Eviction order, hits and ids depend only on key *equality* (docs/replay-kernel.md), so
// any collision-free chain key gives the same results; a cryptographic hash
// is the most obviously collision-free one.

import { createHash } from 'node:crypto';

/** Key of the block tokens[start, end): `parent` is the previous block's key, or null for the first block. */
export function chainKey(parent: string | null, tokens: ArrayLike<number>, start: number, end: number, salt = ''): string {
  const h = createHash('sha1');
  h.update(parent === null ? `root:${salt}:` : `child:${parent}:`);
  const bytes = new Int32Array(end - start);
  for (let i = start; i < end; i++) bytes[i - start] = tokens[i]!;
  h.update(new Uint8Array(bytes.buffer));
  return h.digest('hex');
}

/** The key of block `b` (blocks of `blockSize` tokens) given block b-1's key; the salt only reaches block 0. */
export function blockKey(parent: string | null, tokens: ArrayLike<number>, b: number, blockSize: number, salt: string): string {
  return chainKey(parent, tokens, b * blockSize, (b + 1) * blockSize, parent === null ? salt : '');
}
