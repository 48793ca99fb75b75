// What vLLM's scheduler calls on the KV cache (its KVCacheManager for one
// full-attention group; docs/engines.md). The engine runs on the Wasm pool
// (VllmKvCacheManager); the tests run the same scheduler on the reference
// model through this interface.

import type { VllmRequest } from './request.js';

/** A KV cache's figures, as the vLLM harness counts them (docs/engines.md, figures). */
export interface VllmKvFigures {
  /** Keys dropped when their block was popped again (vLLM's BlockRemoved events). */
  evictedBlocks: number;
  /** Ids popped from the free queue (the null block excluded). */
  allocatedBlocks: number;
  /** h = (h * 31 + id) mod 2^32 over the ids popped, in order. */
  idChecksum: number;
  /** Free blocks without a key (the null block excluded). */
  freeBlocksAtEnd: number;
  /** Blocks that still carry a key. */
  cachedBlocksAtEnd: number;
  /** Distinct keys cached (duplicates share one). */
  cachedKeysAtEnd: number;
  /** allocate_slots calls, those that needed nothing from the pool included. */
  allocateCalls: number;
}

/**
 * What vLLM's KVCacheManager records of its prefix-cache lookups
 * (get_computed_blocks): per lookup of a request never preempted, its
 * tokens as queries and the tokens found as hits; a preempted request's
 * lookups apart (vLLM's preempted_queries and preempted_hits).
 */
export interface VllmPrefixCacheStats {
  /** Lookups of requests never preempted. */
  requests: number;
  /** Their tokens (vLLM's prefix_cache_queries). */
  queries: number;
  /** Their tokens found cached (vLLM's prefix_cache_hits). */
  hits: number;
  preemptedRequests: number;
  preemptedQueries: number;
  preemptedHits: number;
}

export interface VllmKvCache {
  readonly blockSize: number;
  /** The free queue's length: never-used blocks and cached blocks nothing holds. */
  numFreeBlocks(): number;
  /**
   * get_computed_blocks: the blocks of `req`'s longest cached prefix, at
   * most floor((numTokens - 1) / blockSize); changes nothing. The hits are
   * kept for the allocateSlots call on `req` that follows.
   */
  computedBlocks(req: VllmRequest): number;
  /**
   * allocate_slots: blocks for `req.numComputed + hitBlocks * blockSize +
   * numNewTokens` tokens (`hitBlocks` from the computedBlocks call just
   * before; 0 for a running request). False, with nothing changed, when the
   * free queue is short; with `fullSequenceMustFit` the blocks for all of
   * the request's tokens must fit as well. On success the hits are
   * touched, new blocks popped, and every block the scheduled tokens fill
   * is cached.
   */
  allocateSlots(req: VllmRequest, numNewTokens: number, hitBlocks: number, fullSequenceMustFit: boolean): boolean;
  /** Frees the request's blocks, last first (a preemption: the request comes back, its keys are kept). */
  free(req: VllmRequest): void;
  /** The request is done (finished, or dropped): frees its blocks and forgets it. */
  release(req: VllmRequest): void;
  figures(): VllmKvFigures;
  /** The lookups' counters, as vLLM records them (the Wasm manager has them; a cache without returns nothing). */
  prefixCacheStats?(): VllmPrefixCacheStats;
}
