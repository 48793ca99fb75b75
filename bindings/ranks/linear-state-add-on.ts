// Linear state as an add-on a rank carries (recurrent layers of GDN /
// Mamba-style models, see docs/linear-state.md): a checkpoint cache per rank,
// a live slot that comes and goes with the sequence's single id, and shared
// KV blocks trimmed to the block boundaries a checkpoint can restore. Any
// rank kind can carry it; the host tier trims its hits through it as well.

import type { CoreManager } from '../managers/core-manager.js';
import { checkInt } from '../validate.js';
import { LinearStatePrefixCache, type LinearStateCacheOp } from '../linear-state/linear-state-prefix-cache.js';
import type { SequenceState } from './sequence-state.js';

export type LinearStateReuse = 'furthest' | 'contiguous';

/** Computes a sequence's chain hashes at its first block boundaries (the rank knows how). */
export type PrefixHasher = (s: SequenceState, nBlocks: number) => Uint8Array;

export class LinearStateAddOn {
  readonly cache: LinearStatePrefixCache;
  /** Shared KV blocks given back because no checkpoint covered their boundary (the one-token cap excluded). */
  trimmedBlocks = 0;

  constructor(
    numSlots: number,
    readonly reuse: LinearStateReuse,
    /** The core the rank's KV manager lives in: trimming reads its stamped hashes there. */
    kv: CoreManager | null,
  ) {
    this.cache = LinearStatePrefixCache.onCoreOf(kv, { numSlots });
  }

  /** A live slot for a sequence that has none; false when the cache has no slot to give. */
  acquire(s: SequenceState): boolean {
    if (s.linearSlot >= 0) return true;
    const slot = this.cache.acquirePoolSlot(s);
    if (slot === null) return false;
    s.linearSlot = slot;
    s.linearInit = false;
    return true;
  }

  release(s: SequenceState): void {
    if (s.linearSlot < 0) return;
    this.cache.releasePoolSlot(s.linearSlot);
    s.linearSlot = -1;
    s.linearInit = false;
  }

  /**
   * Of the `total` leading entries of `ids` that came from a prefix match
   * (the first `existed` already validated), how many to keep: up to the
   * last usable checkpointed boundary, within the "leave at least one token"
   * cap of a sequence of `numTokens`. `kv` holds the ids' stamped hashes.
   * Counts the blocks given back; the caller drops its references on them.
   */
  keep(kv: CoreManager, ids: Int32Array, numTokens: number, existed: number, total: number): number {
    if (total <= 0) return total;
    const B = kv.blockSize;
    let safe = Math.min(existed, total);
    const cap = numTokens === 0 ? 0 : Math.floor((numTokens - 1) / B);
    const limit = Math.max(safe, Math.min(total, cap));
    if (limit > safe) {
      const ex = this.cache.core();
      this.cache.slots.sameCore(kv, 'the KV manager');
      const staged = kv.rt.staging.stageIds(ids, 0, limit);
      safe = ex.ls_trim(this.cache.ptr, kv.ptr, staged, safe, limit, this.reuse === 'contiguous' ? 1 : 0);
    }
    if (safe < total) this.trimmedBlocks += Math.max(0, limit - safe);
    return safe;
  }

  /**
   * The cache op of `s` for a forward that ends at `stepEnd` tokens: restore
   * on its first forward from the checkpoint at kvCachedTokens, save when it
   * is in prefill and the step ends on a block boundary. Marks the sequence
   * initialized, as the batch builder does.
   */
  cacheOp(s: SequenceState, blockSize: number, stepEnd: number, hashes: (nBlocks: number) => Uint8Array): LinearStateCacheOp {
    const B = blockSize;
    checkInt('stepEnd', stepEnd, s.kvCached, s.numTokens);
    // A forward needs the state it runs on: an op without a live slot would send the worker nowhere.
    if (s.linearSlot < 0) {
      throw new Error('linearStateCacheOp: the sequence holds no live linear-state slot (releaseLinearStateSlot gave it back); allocate it again first');
    }
    const kvc = s.kvCached;
    const restore = !s.linearInit && kvc > 0 && kvc % B === 0;
    const save = kvc < s.numPromptTokens && stepEnd > 0 && stepEnd % B === 0;
    const upTo = save ? stepEnd / B : restore ? kvc / B : 0;
    const h = upTo > 0 ? hashes(upTo) : null;
    const at = (k: number) => h!.slice((k - 1) * 16, k * 16);
    const op: LinearStateCacheOp = {
      liveSlot: s.linearSlot,
      restoreHash: restore ? at(kvc / B) : null,
      saveHash: save ? at(stepEnd / B) : null,
    };
    s.linearInit = true;
    return op;
  }

  /** Audits the cache and that the live slots are exactly those the rank's sequences and open batches hold. */
  check(placed: readonly SequenceState[], rank: number): void {
    this.cache.check();
    const held = new Set<number>();
    for (const s of placed) {
      if (s.linearSlot < 0) continue;
      if (held.has(s.linearSlot)) throw new Error(`kvpool: linear-state slot ${s.linearSlot} is held by two sequences`);
      held.add(s.linearSlot);
    }
    for (const slot of this.cache.inFlightReplacements()) held.add(slot);
    const slots = this.cache.liveSlots();
    if (slots.length !== held.size || slots.some((slot) => !held.has(slot))) {
      throw new Error(
        `kvpool: rank ${rank} linear-state live slots [${slots.join(', ')}] differ from those sequences and open batches hold [${[...held].sort((a, b) => a - b).join(', ')}]`,
      );
    }
  }

  dispose(): void {
    this.cache.dispose();
  }
}
