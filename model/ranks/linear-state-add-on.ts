// Model of the linear-state add-on (bindings/ranks/linear-state-add-on.ts,
// docs/linear-state.md): a checkpoint cache per rank, a live slot that comes
// and goes with the sequence's single id, and shared KV blocks trimmed to
// the block boundaries a checkpoint can restore. Any rank kind carries it.

import type { ModelBlockManager } from '../block-manager-impl.js';
import { ModelLinearStateCache, type ModelOp } from '../linear-state-prefix-cache.js';
import type { ModelSequence } from '../sequence.js';
import { modelInt } from '../validate.js';

export type ModelLinearStateReuse = 'furthest' | 'contiguous';

export class ModelLinearStateAddOn {
  readonly cache: ModelLinearStateCache;
  /** Shared KV blocks given back because no checkpoint covered their boundary (the one-token cap excluded). */
  trimmedBlocks = 0;

  constructor(
    numSlots: number,
    readonly reuse: ModelLinearStateReuse,
  ) {
    this.cache = new ModelLinearStateCache(numSlots);
  }

  /** A live slot for a sequence that has none; false when the cache has none to give. */
  acquire(s: ModelSequence): boolean {
    if (s.linearSlot >= 0) return true;
    const slot = this.cache.acquireLive();
    if (slot === null) return false;
    s.linearSlot = slot;
    s.linearInit = false;
    return true;
  }

  release(s: ModelSequence): void {
    if (s.linearSlot < 0) return;
    this.cache.releaseLive(s.linearSlot);
    s.linearSlot = -1;
    s.linearInit = false;
  }

  /**
   * Of the `total` leading ids of `ids` that came from a prefix match of `m`
   * (the first `existed` already validated), how many to keep: up to the last
   * boundary with a checkpoint (the first missing one ends the run under
   * 'contiguous'), within the "leave at least one token" cap of a sequence
   * of `numTokens`. A matched id's key is the one the match stamped on it.
   * Counts the blocks given back; the caller releases them.
   */
  keep(m: ModelBlockManager, ids: readonly number[], numTokens: number, existed: number, total: number): number {
    if (total <= 0) return total;
    let safe = Math.min(existed, total);
    const cap = numTokens === 0 ? 0 : Math.floor((numTokens - 1) / m.blockSize);
    const limit = Math.max(safe, Math.min(total, cap));
    for (let i = safe; i < limit; i++) {
      if (this.cache.contains(m.stamp.get(ids[i]!)!)) safe = i + 1;
      else if (this.reuse === 'contiguous') break;
    }
    if (safe < total) this.trimmedBlocks += Math.max(0, limit - safe);
    return safe;
  }

  /**
   * The cache op of `s` for a forward ending at `stepEnd` tokens: restore on
   * its first forward from the checkpoint at its computed count (on a block
   * boundary), save when it is in prefill and the step ends on a boundary.
   * `keys(n)` gives its keys at the first n boundaries. Marks it initialized.
   */
  cacheOp(s: ModelSequence, blockSize: number, stepEnd: number, keys: (n: number) => string[]): ModelOp {
    const B = blockSize;
    modelInt('stepEnd', stepEnd, s.kvCachedTokens, s.numTokens);
    if (s.linearSlot < 0) throw new Error('model: the sequence holds no live slot');
    const kvc = s.kvCachedTokens;
    const restore = !s.linearInit && kvc > 0 && kvc % B === 0;
    const save = kvc < s.numPromptTokens && stepEnd > 0 && stepEnd % B === 0;
    const upTo = save ? stepEnd / B : restore ? kvc / B : 0;
    const k = upTo > 0 ? keys(upTo) : [];
    s.linearInit = true;
    return { liveSlot: s.linearSlot, restore: restore ? k[kvc / B - 1]! : null, save: save ? k[stepEnd / B - 1]! : null };
  }
}
