// The index's chain keys, computed by the core: a block's key is XXH3-128
// (seed 0) of its parent's key (16 bytes) followed by its tokens as int32
// little endian, or of its tokens alone for a first block without salt or
// LoRA. A run of blocks is hashed in one call (the core's block chain), and
// the keys come back as 4 u32 words each, with no string or copy per block.

import { plainCore } from '../core/plain-core.js';
import { xxh3_128 } from '../hash.js';

const utf8 = new TextEncoder();

/**
 * Writes the keys of `n` blocks of `B` tokens at `tokens[at..]` to
 * `out[0..4n)`, block 0 chained on the key at `parent[pAt..pAt+4)` (or on
 * nothing when `parent` is null), each next block on the one before.
 */
export function chainKeys(tokens: ArrayLike<number>, at: number, n: number, B: number, parent: Uint32Array | null, pAt: number, out: Uint32Array): void {
  if (n === 0) return;
  const rt = plainCore();
  const tp = rt.staging.stageTokens(tokens, at, at + n * B);
  const bp = rt.staging.byteSpace(16 + 16 * n);
  // Views after staging (staging may grow the memory); byteSpace is 16-byte aligned.
  const u32 = rt.u32;
  const q = bp >>> 2;
  if (parent !== null) for (let i = 0; i < 4; i++) u32[q + i] = parent[pAt + i]!;
  rt.ex.hash_blocks_from(tp, n * B, B, 0, 0, parent === null ? 0 : bp, bp + 16);
  out.set(rt.u32.subarray(q + 4, q + 4 + 4 * n));
}

function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return [...v];
  if (typeof v === 'bigint') return v.toString();
  if (Array.isArray(v)) return v.map(plain);
  return v;
}

/** The parent key of a sequence's first block (4 words): none, or one made of its LoRA and extra keys (a salt). */
export function rootKey(lora: string | null, extra: readonly unknown[] | null): Uint32Array | null {
  if (lora === null && (extra === null || extra.length === 0)) return null;
  const h = xxh3_128(utf8.encode(JSON.stringify([lora, extra === null ? [] : plain(extra)])));
  return new Uint32Array(h.buffer, h.byteOffset, 4).slice();
}
