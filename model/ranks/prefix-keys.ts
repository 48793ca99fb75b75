// Model of the chain keys at a sequence's block boundaries
// (bindings/ranks/prefix-hashes.ts), salted like its blocks: what keys
// linear-state checkpoints. A held block that carries a stamped key gives
// it; every other block is keyed from the tokens on the previous boundary.

import type { ModelBlockManager } from '../block-manager-impl.js';
import { blockKey } from '../chain-key.js';
import type { ModelSequence } from '../sequence.js';

/** Keys of the first `n` boundaries of `s`, taking the keys `m` stamped on its held blocks (m null: none). */
export function modelPrefixKeys(m: ModelBlockManager | null, s: ModelSequence, n: number, blockSize: number): string[] {
  const keys: string[] = [];
  let parent: string | null = null;
  // A pending beam: the tokens are the source's already, and so are the blocks that will hold them.
  const table = s.beamSource?.table ?? s.blockTable;
  for (let b = 0; b < n; b++) {
    const stamped = m !== null && b < table.length ? m.stamp.get(table[b]!) : undefined;
    parent = stamped ?? blockKey(parent, s.tokens, b, blockSize, s.salt);
    keys.push(parent);
  }
  return keys;
}
