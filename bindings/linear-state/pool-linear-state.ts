// What BlockManagerPool does differently with linear state on (SEMANTICS
// C.4-C.6, A.12): one LinearStatePrefixCache per dp rank, a live slot that
// comes and goes with the sequence's single id, dp choice skipping ranks
// whose single ids are exhausted, and shared KV blocks trimmed to the block
// boundaries a checkpoint can restore. The pool calls these through narrow
// hooks so its own code stays the plain path.

import type { BlockManagerImpl } from '../managers/block-manager-impl.js';
import type { Sequence } from '../pool/sequence.js';
import { checkBool, checkInt, describe } from '../validate.js';
import { LinearStatePrefixCache, type LinearStateCacheOp } from './linear-state-prefix-cache.js';

export type LinearStateReuse = 'furthest' | 'contiguous';

export interface LinearStatePoolOptions {
  /** One linear-state cache per dp rank (default false). */
  enableLinearState?: boolean;
  /** Slots per rank's cache, padding included (default 202, like single ids). */
  linearStateNumSlots?: number;
  /**
   * Which shared KV prefix a checkpoint makes reusable: up to the furthest
   * checkpointed block boundary (every xLLM version; default), or only the
   * leading run of checkpointed boundaries (the seed's text).
   */
  linearStateReuse?: LinearStateReuse;
}

export const LINEAR_STATE_KEYS = ['enableLinearState', 'linearStateNumSlots', 'linearStateReuse'] as const;

export function parseLinearStateOptions(o: LinearStatePoolOptions) {
  const enabled = checkBool('options.enableLinearState', o.enableLinearState ?? false);
  const numSlots = checkInt('options.linearStateNumSlots', o.linearStateNumSlots ?? 202, 2);
  const reuse = o.linearStateReuse ?? 'furthest';
  if (reuse !== 'furthest' && reuse !== 'contiguous') {
    throw new RangeError(`options.linearStateReuse must be 'furthest' or 'contiguous', got ${describe(reuse)}`);
  }
  return { enabled, numSlots, reuse: reuse as LinearStateReuse };
}

export class PoolLinearState {
  readonly caches: LinearStatePrefixCache[] = [];
  /** Per rank: shared KV blocks given back because no checkpoint covered their boundary (the cap excluded). */
  readonly trimmedBlocks: number[] = [];

  constructor(
    dpSize: number,
    numSlots: number,
    readonly reuse: LinearStateReuse,
  ) {
    try {
      for (let r = 0; r < dpSize; r++) {
        this.caches.push(new LinearStatePrefixCache({ numSlots }));
        this.trimmedBlocks.push(0);
      }
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /** A live slot for a sequence that has none; false when rank `r` has no slot to give. */
  acquire(seq: Sequence, r: number): boolean {
    if (seq._linearSlot >= 0) return true;
    const s = this.caches[r]!.acquireLiveSlot();
    if (s === null) return false;
    seq._linearSlot = s;
    seq._linearInit = false;
    return true;
  }

  release(seq: Sequence, r: number): void {
    if (seq._linearSlot < 0) return;
    this.caches[r]!.releaseLiveSlot(seq._linearSlot);
    seq._linearSlot = -1;
    seq._linearInit = false;
  }

  /**
   * SEMANTICS C.4: of the `total` leading blocks of `seq`'s table that came
   * from a prefix match (the first `existed` were already held), keeps those
   * up to the last usable checkpointed boundary within the "leave at least one
   * token" cap; drops the sequence's reference on the rest (they stay in the
   * KV prefix cache). Returns how many to keep.
   */
  trim(kv: BlockManagerImpl, seq: Sequence, r: number, existed: number, total: number): number {
    if (total <= 0) return total;
    const B = kv.blockSize;
    const n = seq._numTokens;
    let safe = Math.min(existed, total);
    const cap = n === 0 ? 0 : Math.floor((n - 1) / B);
    const limit = Math.max(safe, Math.min(total, cap));
    if (limit > safe) {
      const cache = this.caches[r]!;
      const ex = cache.core();
      cache.slots.sameCore(kv, 'the KV manager');
      const ids = kv.rt.staging.stageIds(seq._table, 0, limit);
      safe = ex.ls_trim(cache.ptr, kv.ptr, ids, safe, limit, this.reuse === 'contiguous' ? 1 : 0);
    }
    if (safe < total) {
      this.trimmedBlocks[r]! += Math.max(0, limit - safe);
      const code = kv.releaseFrom(seq._table, safe, total);
      if (code < 0) throw new Error(`kvpool: internal error trimming shared blocks (core code ${code})`);
    }
    return safe;
  }

  /**
   * The cache op of `seq` for a forward that ends at `stepEnd` tokens
   * (SEMANTICS C.3): restore on its first forward from the checkpoint at
   * kvCachedTokens, save when it is in prefill and the step ends on a block
   * boundary. Marks the sequence initialized, as the batch builder does.
   */
  cacheOp(kv: BlockManagerImpl, seq: Sequence, stepEnd: number): LinearStateCacheOp {
    const B = kv.blockSize;
    checkInt('stepEnd', stepEnd, seq._kvCached, seq._numTokens);
    const kvc = seq._kvCached;
    const restore = !seq._linearInit && kvc > 0 && kvc % B === 0;
    const save = kvc < seq.numPromptTokens && stepEnd > 0 && stepEnd % B === 0;
    const upTo = save ? stepEnd / B : restore ? kvc / B : 0;
    const hashes = upTo > 0 ? prefixHashesOf(kv, seq, upTo) : null;
    const at = (k: number) => hashes!.slice((k - 1) * 16, k * 16);
    const op: LinearStateCacheOp = {
      liveSlot: seq._linearSlot,
      restoreHash: restore ? at(kvc / B) : null,
      saveHash: save ? at(stepEnd / B) : null,
    };
    seq._linearInit = true;
    return op;
  }

  check(live: ReadonlySet<Sequence>): void {
    for (const c of this.caches) c.check();
    const held = this.caches.map(() => new Set<number>());
    for (const seq of live) {
      if (seq._linearSlot < 0) continue;
      const set = held[seq._dpRank]!;
      if (set.has(seq._linearSlot)) throw new Error(`kvpool: linear-state slot ${seq._linearSlot} is held by two sequences`);
      set.add(seq._linearSlot);
    }
    this.caches.forEach((c, r) => {
      for (const s of c.inFlightReplacements()) held[r]!.add(s);
      const slots = c.liveSlots();
      if (slots.length !== held[r]!.size || slots.some((s) => !held[r]!.has(s))) {
        throw new Error(`kvpool: rank ${r} linear-state live slots [${slots.join(', ')}] differ from those sequences and open batches hold [${[...held[r]!].sort((a, b) => a - b).join(', ')}]`);
      }
    });
  }

  dispose(): void {
    for (const c of this.caches) c.dispose();
  }
}

/** Chain hashes at the first `nBlocks` boundaries of `seq` (stamped KV hashes reused). */
export function prefixHashesOf(kv: BlockManagerImpl, seq: Sequence, nBlocks: number): Uint8Array {
  kv.live();
  const B = kv.blockSize;
  const rt = kv.rt;
  const out = rt.staging.byteSpace(nBlocks * 16);
  const tok = rt.staging.stageTokens(seq._tokens, 0, nBlocks * B);
  const nHeld = Math.min(seq._numBlocks, nBlocks);
  const ids = rt.staging.stageIds(seq._table, 0, nHeld);
  rt.ex.ls_prefix_hashes(kv.ptr, ids, nHeld, tok, nBlocks, out);
  return rt.u8.slice(out, out + nBlocks * 16);
}
