// SlidingWindowBlockManager (docs/composite.md): the block pool of the
// sliding-window attention layers. Allocation is BlockManagerImpl's with the
// prefix cache off; what it adds is the window rule (docs/composite.md, the
// window rule): once a sequence has `kvCachedTokens` computed tokens, its
// leading blocks that only hold tokens older than the last W - 1 are given
// back.

import { loadCore } from '../core/plain-core.js';
import { checkInt, checkInt32Array, checkKeys, checkObject, describe } from '../validate.js';
import { BlockManagerImpl } from './block-manager-impl.js';
import { RELEASED } from './composite-block-tables.js';
import { throwIdError } from './core-errors.js';

export interface SlidingWindowBlockManagerOptions {
  /** Physical blocks, padding id 0 included (>= 2). */
  numBlocks: number;
  /** Tokens per block (>= 1). */
  blockSize: number;
  /** Attention window W in tokens (>= 1). */
  slidingWindowSize: number;
}

/** Inputs of the reference's SWA pool sizing rule (docs/composite.md, layout). */
export interface SwaPoolSizing {
  blockSize: number;
  slidingWindowSize: number;
  /** Default `(W - 1) / B + 1` (integer division): blocks one sequence keeps. */
  swaBlocksPerSeq?: number;
  /** Default 256 (xLLM's `max_seqs_per_batch`). */
  maxSeqsPerBatch?: number;
  /** Default 20480 (xLLM's `max_tokens_per_batch`). */
  maxTokensPerBatch?: number;
}

export const DEFAULT_MAX_SEQS_PER_BATCH = 256;
export const DEFAULT_MAX_TOKENS_PER_BATCH = 20480;

/** Blocks a sequence keeps for a window of `W` tokens: `(W - 1) / B + 1`. */
export function swaBlocksPerSeq(slidingWindowSize: number, blockSize: number): number {
  checkInt('slidingWindowSize', slidingWindowSize, 1);
  checkInt('blockSize', blockSize, 1);
  return windowBlocksPerSeq(slidingWindowSize, blockSize);
}

/** @internal swaBlocksPerSeq of checked arguments. */
export function windowBlocksPerSeq(slidingWindowSize: number, blockSize: number): number {
  return Math.floor((slidingWindowSize - 1) / blockSize) + 1;
}

/**
 * Physical blocks of an SWA pool, padding included, by the reference's rule:
 * `perSeq * maxSeqs + ceil(max(maxTokensPerBatch, 1) / B) + maxSeqs + 2`
 * with `maxSeqs = max(maxSeqsPerBatch, 1)`. The `maxSeqs + 2` term is the
 * slack a step needs because a window's old blocks are released only after
 * its new ones are allocated.
 */
export function swaPoolBlocks(s: SwaPoolSizing): number {
  checkObject('sizing', s);
  checkKeys('sizing', s, ['blockSize', 'slidingWindowSize', 'swaBlocksPerSeq', 'maxSeqsPerBatch', 'maxTokensPerBatch']);
  const B = checkInt('sizing.blockSize', s.blockSize, 1);
  const W = checkInt('sizing.slidingWindowSize', s.slidingWindowSize, 1);
  const perSeq = s.swaBlocksPerSeq === undefined ? windowBlocksPerSeq(W, B) : checkInt('sizing.swaBlocksPerSeq', s.swaBlocksPerSeq, 1);
  const maxSeqs = Math.max(s.maxSeqsPerBatch === undefined ? DEFAULT_MAX_SEQS_PER_BATCH : checkInt('sizing.maxSeqsPerBatch', s.maxSeqsPerBatch), 1);
  const maxTokens = Math.max(s.maxTokensPerBatch === undefined ? DEFAULT_MAX_TOKENS_PER_BATCH : checkInt('sizing.maxTokensPerBatch', s.maxTokensPerBatch), 1);
  return perSeq * maxSeqs + Math.ceil(maxTokens / B) + maxSeqs + 2;
}

/**
 * Leading blocks of a window table that slid out once `kvCachedTokens` tokens
 * are computed (docs/composite.md, the window rule): `floor((cached - W + 1) / B)` when
 * `cached >= W`, capped by the table's length.
 */
export function outOfWindowBlocks(kvCachedTokens: number, slidingWindowSize: number, blockSize: number, length: number): number {
  checkInt('kvCachedTokens', kvCachedTokens);
  checkInt('slidingWindowSize', slidingWindowSize, 1);
  checkInt('blockSize', blockSize, 1);
  checkInt('length', length);
  return slidOutBlocks(kvCachedTokens, slidingWindowSize, blockSize, length);
}

/** @internal outOfWindowBlocks of checked arguments (the managers' step path). */
export function slidOutBlocks(kvCachedTokens: number, slidingWindowSize: number, blockSize: number, length: number): number {
  if (kvCachedTokens < slidingWindowSize) return 0;
  return Math.min(Math.floor((kvCachedTokens - slidingWindowSize + 1) / blockSize), length);
}

function parse(o: SlidingWindowBlockManagerOptions) {
  checkObject('options', o);
  checkKeys('options', o, ['numBlocks', 'blockSize', 'slidingWindowSize']);
  const numBlocks = checkInt('options.numBlocks', o.numBlocks, 2);
  const blockSize = checkInt('options.blockSize', o.blockSize, 1);
  const slidingWindowSize = checkInt('options.slidingWindowSize', o.slidingWindowSize, 1);
  return { numBlocks, blockSize, slidingWindowSize };
}

export class SlidingWindowBlockManager extends BlockManagerImpl {
  /** Attention window W in tokens. */
  readonly slidingWindowSize: number;

  constructor(options: SlidingWindowBlockManagerOptions) {
    const o = parse(options);
    super({ numBlocks: o.numBlocks, blockSize: o.blockSize, enablePrefixCache: false });
    this.slidingWindowSize = o.slidingWindowSize;
  }

  static override async create(options: SlidingWindowBlockManagerOptions): Promise<SlidingWindowBlockManager> {
    parse(options);
    await loadCore();
    return new SlidingWindowBlockManager(options);
  }

  /** No prefix cache: nothing matches. */
  override allocateShared(tokens: ArrayLike<number>, existingShared: ArrayLike<number> = []): Int32Array {
    this.live();
    checkInt32Array('tokens', tokens);
    checkInt32Array('existingShared', existingShared);
    return new Int32Array(0);
  }

  /** No prefix cache: nothing is cached. */
  override cache(tokens: ArrayLike<number>, ids: ArrayLike<number>, existingSharedCount = 0): number {
    this.live();
    checkInt32Array('tokens', tokens);
    checkInt32Array('ids', ids);
    checkInt('existingSharedCount', existingSharedCount);
    return 0;
  }

  /** Leading blocks of a table of `length` blocks that slid out at `kvCachedTokens` (the window rule). */
  outOfWindow(kvCachedTokens: number, length: number): number {
    this.live();
    checkInt('kvCachedTokens', kvCachedTokens);
    checkInt('length', length);
    return slidOutBlocks(kvCachedTokens, this.slidingWindowSize, this.blockSize, length);
  }

  /**
   * Gives back the ids of `table` that slid out of the window at
   * `kvCachedTokens`, in index order, and writes -1 in their place. Returns
   * how many ids were given back (0 on a second call: placeholders are skipped).
   * Every id must be held by the caller; on a bad id nothing changes.
   */
  releaseOutOfWindow(table: Int32Array, kvCachedTokens: number): number {
    this.live();
    if (!(table instanceof Int32Array)) throw new TypeError(`table must be an Int32Array, got ${describe(table)}`);
    checkInt('kvCachedTokens', kvCachedTokens);
    let first = 0;
    while (first < table.length && table[first] === RELEASED) first++;
    const upto = slidOutBlocks(kvCachedTokens, this.slidingWindowSize, this.blockSize, table.length);
    if (upto <= first) return 0;
    for (let i = first; i < upto; i++) {
      if (table[i] === RELEASED) throw new RangeError(`table[${i}] = -1 follows a held block: placeholders must lead the table`);
    }
    const code = this.releaseFrom(table, first, upto);
    if (code < 0) throwIdError(code, 'table', table, first, this.numBlocks, this.ex);
    table.fill(RELEASED, first, upto);
    return upto - first;
  }
}
