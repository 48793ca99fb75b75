// The replay loop on a pool with linear state (`--linear-state-slots N`).
// Rule, per request, once its prompt of L tokens is placed with h shared
// blocks (already trimmed to a checkpoint): one batch whose first op restores
// from the checkpoint at boundary h (when h > 0) and which saves a checkpoint
// at every block boundary k*B with h < k <= floor(L/B), resolved on the
// sequence's rank and committed at once (the worker copied the states).
// It wraps the target of any rank kind or tier: plain, host tier, composite.

import type { Sequence } from '../pool/sequence.js';
import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import type { ReplayResult, ReplaySequence, ReplayTarget } from './kernel.js';
import { prefillScratchBytes } from '../linear-state/linear-state-prefix-cache.js';

/** Wraps another mode's target (type-only import: replay.ts constructs this one). */
export class LinearStateReplayTarget<S extends ReplaySequence> implements ReplayTarget<S> {
  private hits = 0;
  private saved = 0;
  readonly pool: BlockManagerPool;
  /** @internal The base target's (its sequences are the base's). */
  readonly holdsPrompt: boolean;
  /**
   * @internal The base target's: what this target adds reads a sequence's
   * tokens only through stagings (its prefix hashes).
   */
  get keepsPrompt(): boolean {
    return this.base.keepsPrompt === true;
  }
  /** The base target's. */
  get blockSize(): number | undefined {
    return this.base.blockSize;
  }
  /** The base target's, when it has one. */
  readonly appendOutputs?: (seq: S, first: number, count: number) => void;
  /** @internal The base target's, when it has one. */
  readonly advanceOutputs?: (seq: S, count: number) => void;
  /** The base target's, when it has one (a pool's refuses a step that owes a live slot). */
  readonly decodeSteps?: (seq: S, steps: number) => number;

  /** `poolSequence`: the pool's Sequence behind one of the base target's sequences. */
  constructor(
    private readonly base: ReplayTarget<S> & { readonly pool: BlockManagerPool },
    private readonly poolSequence: (s: S) => Sequence,
  ) {
    this.pool = base.pool;
    this.holdsPrompt = base.holdsPrompt === true;
    if (base.appendOutputs) this.appendOutputs = base.appendOutputs.bind(base);
    if (base.advanceOutputs) this.advanceOutputs = base.advanceOutputs.bind(base);
    if (base.decodeSteps) this.decodeSteps = base.decodeSteps.bind(base);
  }

  newSequence(buffer: Int32Array, promptLength: number, outputsFrom?: number): S {
    return this.base.newSequence(buffer, promptLength, outputsFrom);
  }
  allocate(seq: S, numTokens?: number): boolean {
    return this.base.allocate(seq, numTokens);
  }
  decodeRoom(seq: S): number {
    return this.base.decodeRoom?.(seq) ?? 0;
  }
  cache(seq: S): void {
    this.base.cache(seq);
  }
  deallocate(seq: S): void {
    this.base.deallocate(seq);
  }
  recycle(seq: S): Int32Array | undefined {
    return this.base.recycle?.(seq);
  }
  blockIds(seq: S): ArrayLike<number> {
    return this.base.blockIds?.(seq) ?? seq.blockTable;
  }
  blocksEvicted(): number {
    return this.base.blocksEvicted();
  }
  numFreeBlocks(): number {
    return this.base.numFreeBlocks();
  }
  numBlocksInPrefixCache(): number {
    return this.base.numBlocksInPrefixCache();
  }

  prefilled(s: S): void {
    const seq = this.poolSequence(s);
    const B = this.pool.blockSize;
    const h = seq.sharedBlocks;
    const full = Math.floor(seq.numTokens / B);
    if (full === 0) return;
    const cache = this.pool.linearStateCache(seq.dpRank);
    // The hashes stay in the core when the rank can leave them there (and
    // that is the cache's core): not copied out and back in.
    const inCore = this.pool.prefixHashesIn(seq, full, prefillScratchBytes(full - h));
    const hashes = inCore !== null && inCore.rt === cache.slots.rt ? inCore : seq.prefixHashes();
    seq.markLinearStateInitialized();
    // The batch of the rule above, resolved and committed in one call: the
    // same as resolveCacheOps([restore at h, save at h+1..full]) then
    // commitReservations (test/replay-linear-state.test.ts compares them).
    const r = hashes instanceof Uint8Array ? cache.prefillBatch(hashes, h, full) : cache.prefillBatchAt(hashes, h, full);
    if (h > 0 && r.restoredSlot > 0) this.hits++;
    this.saved += r.committed;
  }

  extraResult(): Pick<ReplayResult, 'linearState'> {
    const s = this.pool.linearStateStats();
    return {
      linearState: {
        checkpointHits: this.hits,
        checkpointsSaved: this.saved,
        checkpointEvictions: s.reduce((a, r) => a + r.checkpointsEvicted, 0),
        trimmedBlocks: s.reduce((a, r) => a + r.trimmedBlocks, 0),
      },
    };
  }
}
