// The scheduler-level interface (docs/pool.md): one request, one sequence.

import type { Sequence } from './sequence.js';

export type { BlockTransferInfo } from '../ranks/rank-manager.js';

export interface KVCacheManager {
  /**
   * Makes room for `numTokens` tokens (default: all of its tokens). On a
   * sequence that holds nothing, reuses matching prefix-cache blocks first.
   * Returns false when blocks run out; the sequence then holds exactly what
   * it held before the call.
   */
  allocate(sequence: Sequence, numTokens?: number): boolean;
  /** Allocates each in turn and stops at the first failure (not atomic). */
  allocate(sequences: readonly Sequence[]): boolean;
  /** Admits the whole prompt as already computed (prefill-only / PD paths). */
  tryAllocate(sequence: Sequence): boolean;
  /** Attaches matching prefix-cache blocks to a sequence that holds none; returns its shared blocks. */
  allocateShared(sequence: Sequence): number;
  /** Publishes the sequence's computed full blocks (or its first `numTokens` tokens) to the prefix cache. */
  cache(sequence: Sequence, numTokens?: number): void;
  /** Caches the computed blocks, then gives everything back and resets the sequence. */
  deallocate(sequence: Sequence | readonly Sequence[]): void;
  /** Gives everything back without caching. */
  deallocateWithoutCache(sequence: Sequence): void;
  numFreeBlocks(): number[];
  numUsedBlocks(): number[];
  numBlocksInPrefixCache(): number[];
  kvCacheUtilization(): number;
  /** Audits every manager and every live sequence; throws on inconsistency. */
  check(): void;
}
