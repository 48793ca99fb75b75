// Chain hashes at a sequence's block boundaries (salted like its blocks): what keys linear-state
// checkpoints. A rank with a prefix cache takes the hashes already stamped on
// the sequence's blocks and hashes the rest from the tokens; a rank without
// one hashes every block from the tokens.

import type { CoreInstance } from '../core/core-instance.js';
import { CoreManager } from '../managers/core-manager.js';
import type { PoolManager } from '../managers/pool-manager.js';
import type { SequenceState } from './sequence-state.js';

/** Hashes of the first `nBlocks` boundaries of `s`, reusing the hashes `kv` stamped on its blocks. */
export function hashChainOf(kv: PoolManager, s: SequenceState, nBlocks: number): Uint8Array {
  const out = hashChainIn(kv, s, nBlocks, 0);
  return coreBacked(kv).rt.u8.slice(out, out + nBlocks * 16);
}

function coreBacked(kv: PoolManager): CoreManager {
  if (!(kv instanceof CoreManager)) throw new Error('kvpool: this rank has no core-backed KV manager (block hashes need one)');
  return kv;
}

/**
 * hashChainOf left in the core: the hashes at the returned address of
 * `kv`'s core (its staging memory, valid until the next staging), with
 * `extra` more bytes reserved right after them for the caller.
 */
export function hashChainIn(pm: PoolManager, s: SequenceState, nBlocks: number, extra: number): number {
  const kv = coreBacked(pm);
  kv.live();
  const B = kv.blockSize;
  const rt = kv.rt;
  // The salt's digest sits in front of the hashes, in the same area.
  const area = rt.staging.byteSpace(16 + nBlocks * 16 + extra);
  const out = area + 16;
  const salt = s.saltKey === null ? 0 : area;
  if (s.saltKey !== null) rt.u8.set(s.saltKey, area);
  const nHeld = Math.min(s.numBlocks, nBlocks);
  const ids = rt.staging.stageIds(s.table, 0, nHeld);
  // Blocks [0, hashed) carry their hashes: their tokens are not needed
  // (should one lack its stamp after all, the core says so and every token is staged).
  const from = Math.min(s.hashed, nHeld);
  let tok = rt.staging.stageTokens(s.tokens, from * B, nBlocks * B);
  if (rt.ex.ls_prefix_hashes(kv.ptr, ids, nHeld, tok, nBlocks, out, from, salt) < 0) {
    tok = rt.staging.stageTokens(s.tokens, 0, nBlocks * B);
    rt.ex.ls_prefix_hashes(kv.ptr, ids, nHeld, tok, nBlocks, out, 0, salt);
  }
  return out;
}

/** Hashes of the first `nBlocks` boundaries of `s` (blocks of `blockSize`), all from its tokens. */
export function hashChainFromTokens(rt: CoreInstance, s: SequenceState, nBlocks: number, blockSize: number, seedLo: number, seedHi: number): Uint8Array {
  rt.live();
  const area = rt.staging.byteSpace(16 + nBlocks * 16);
  const out = area + 16;
  if (s.saltKey !== null) rt.u8.set(s.saltKey, area);
  const tok = rt.staging.stageTokens(s.tokens, 0, nBlocks * blockSize);
  rt.ex.hash_blocks_from(tok, nBlocks * blockSize, blockSize, seedLo, seedHi, s.saltKey === null ? 0 : area, out);
  return rt.u8.slice(out, out + nBlocks * 16);
}
