// The replay kernel on a composite pool (hybrid attention): sub-manager 0 is
// a sliding window of W tokens with the base block size, then one full
// sub-manager per compress ratio. There is no prefix cache, so the kernel's
// hit figures are 0; its id figures (allocatedBlocks, idChecksum, free
// blocks) are those of the capacity sub-manager, and the result gains one
// row per sub-manager: peak ids held and ids given back by the window.

import type { ManagerType } from '../managers/composite-block-manager.js';
import type { BlockManagerPool, BlockManagerPoolOptions } from '../pool/block-manager-pool.js';
import { Sequence, adoptBuffer } from '../pool/sequence.js';
import { checkInt, describe } from '../validate.js';
import type { ReplaySequence, ReplayTarget } from './kernel.js';
import { appendOutputRun } from './output-run.js';

/** One sub-manager's figures after a composite replay. */
export interface SubManagerReplayStats {
  kind: 'full' | 'sliding-window';
  blockSize: number;
  /** Physical blocks, padding included. */
  numBlocks: number;
  /** The most ids held at once (right after an allocation round, before the window release). */
  peakUsedBlocks: number;
  /** Ids handed out over the run. */
  allocatedBlocks: number;
  /** Ids given back because they slid out of the window. */
  releasedBlocks: number;
}

/** Validates `compressRatios` (a list of ratios >= 1; default [1]). */
export function parseCompressRatios(name: string, v: unknown): number[] {
  if (v === undefined) return [1];
  if (!Array.isArray(v) || v.length === 0) throw new TypeError(`${name} must be a non-empty array of integers, got ${describe(v)}`);
  return v.map((r, i) => checkInt(`${name}[${i}]`, r, 1));
}

/** Pool options of a composite replay: window first, then the full sub-managers. */
export function compositePoolOptions(
  base: { numBlocks: number; blockSize: number; seed: number; maxRunning: number; dpSize?: number },
  slidingWindow: number,
  compressRatios: readonly number[],
): BlockManagerPoolOptions {
  return {
    numBlocks: base.numBlocks,
    blockSize: base.blockSize,
    seed: base.seed,
    dpSize: base.dpSize ?? 1,
    managerTypes: [1 as ManagerType, ...compressRatios.map(() => 0 as ManagerType)],
    compressRatios: [0, ...compressRatios],
    slidingWindowSize: slidingWindow,
    maxSeqsPerBatch: base.maxRunning,
  };
}

/** A sequence as the kernel sees it: the block table is the capacity sub-manager's. */
export class CompositeReplaySequence implements ReplaySequence {
  constructor(
    readonly seq: Sequence,
    private readonly table: number,
  ) {}
  get numTokens(): number {
    return this.seq.numTokens;
  }
  get numBlocks(): number {
    const c = this.seq.state.composite;
    return c ? c._lengths[this.table]! : 0; // the replay's table index is its own: no check
  }
  get sharedBlocks(): number {
    return 0;
  }
  get kvCachedTokens(): number {
    return this.seq.kvCachedTokens;
  }
  set kvCachedTokens(n: number) {
    this.seq.kvCachedTokens = n;
  }
  appendToken(token: number): void {
    this.seq.appendToken(token);
  }
  get blockTable(): ArrayLike<number> {
    const c = this.seq.state.composite;
    return c ? c.table(this.table) : new Int32Array(0);
  }
}

const EMPTY = new Int32Array(0);

/** The replay loop's view of a composite BlockManagerPool (figures summed over dp ranks). */
export class CompositeReplayTarget implements ReplayTarget<CompositeReplaySequence> {
  /** @internal The pool reads each prompt from the buffer it was given. */
  readonly holdsPrompt = true;
  private readonly capacity: number;
  constructor(readonly pool: BlockManagerPool) {
    this.capacity = pool.compositeManager(0)!.capacityIndex;
  }
  newSequence(buffer: Int32Array, promptLength: number): CompositeReplaySequence {
    return new CompositeReplaySequence(adoptBuffer(buffer, promptLength), this.capacity);
  }
  allocate(s: CompositeReplaySequence, numTokens?: number): boolean {
    return this.pool.allocate(s.seq, numTokens);
  }
  cache(s: CompositeReplaySequence): void {
    this.pool.cache(s.seq);
  }
  deallocate(s: CompositeReplaySequence): void {
    this.pool.deallocate(s.seq);
  }
  /**
   * The finished sequence's token buffer, for a later request (a new one per
   * request cost a tenth of the loop); its block tables go back to its
   * rank's manager for the same reason.
   */
  recycle(s: CompositeReplaySequence): Int32Array {
    const st = s.seq.state;
    if (st.composite !== null && st.dpRank >= 0) {
      this.pool.compositeManager(st.dpRank)!.recycleTables(st.composite);
      st.composite = null;
    }
    return st.tokens;
  }
  decodeRoom(s: CompositeReplaySequence): number {
    return this.pool.decodeRoom(s.seq);
  }
  appendOutputs(s: CompositeReplaySequence, first: number, count: number): void {
    appendOutputRun(s.seq, first, count);
  }
  /** The capacity table itself, no view (the loop reads it after every allocation that added blocks). */
  blockIds(s: CompositeReplaySequence): Int32Array {
    const c = s.seq.state.composite;
    return c === null ? EMPTY : c._tables[this.capacity]!;
  }
  blocksEvicted(): number {
    return 0;
  }
  numFreeBlocks(): number {
    return this.pool.numFreeBlocks().reduce((a, b) => a + b, 0);
  }
  numBlocksInPrefixCache(): number {
    return 0;
  }
  /** Per-sub-manager figures of the run (peaks, ids handed out and given back summed over dp ranks). */
  subManagers(): SubManagerReplayStats[] {
    const m = this.pool.compositeManager(0)!;
    const ranks = Array.from({ length: this.pool.dpSize }, (_, r) => this.pool.compositeManager(r)!.subManagerStats());
    return m.subManagerStats().map((s, i) => {
      const sum = (k: 'peakUsedBlocks' | 'blocksAllocated' | 'blocksReleasedOutOfWindow') => ranks.reduce((a, st) => a + st[i]![k], 0);
      return {
        kind: s.kind,
        blockSize: s.blockSize,
        numBlocks: m.specs[i]!.numBlocks,
        peakUsedBlocks: sum('peakUsedBlocks'),
        allocatedBlocks: sum('blocksAllocated'),
        releasedBlocks: sum('blocksReleasedOutOfWindow'),
      };
    });
  }
}
