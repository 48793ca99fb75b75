// Model of vLLM v1's KVCacheManager for one full-attention group (docs/engines.md):
// what the scheduler calls on the block pool. Per request it keeps the
// blocks in logical order and how many of them are cached.
//
// - getComputedBlocks: the longest cached prefix, never the whole request:
//   at most floor((numTokens - 1) / B) blocks, so at least one token is
//   computed (vLLM needs its logits). Changes nothing.
// - allocateSlots: blocks for `numComputed + hits + numNewTokens` tokens.
//   It first counts what it needs (new blocks, plus the hit blocks that sit
//   in the queue, since touching them takes them out) against the queue's
//   length and fails with nothing changed when short; with
//   fullSequenceMustFit the same count for all of the request's tokens must
//   fit too. Then it touches the hits, pops the new blocks and caches every
//   block that the scheduled tokens fill (up to the request's tokens).
// - free: the request's blocks, last first.

import { modelInt } from '../validate.js';
import type { ModelVllmBlockPool } from './block-pool.js';

/** What the manager reads of a request (vLLM's Request). */
export interface ModelVllmRequestView {
  readonly id: number;
  /** Tokens whose KV is computed (0 for a waiting request). */
  readonly numComputedTokens: number;
  /** Prompt and output tokens so far. */
  readonly numTokens: number;
  /** The chain key of each full block of its tokens so far (at least floor(numTokens / B)). */
  readonly keys: readonly string[];
}

const cdiv = (a: number, b: number): number => Math.ceil(a / b);

export class ModelVllmKvCacheManager {
  private readonly blocks = new Map<number, number[]>();
  private readonly numCached = new Map<number, number>();

  constructor(
    readonly pool: ModelVllmBlockPool,
    readonly blockSize: number,
  ) {
    modelInt('blockSize', blockSize, 1);
  }

  /** The cached prefix: its blocks, and its length in tokens. */
  getComputedBlocks(req: ModelVllmRequestView): { blocks: number[]; tokens: number } {
    const max = Math.floor((req.numTokens - 1) / this.blockSize);
    const blocks = this.pool.lookup(req.keys, max);
    return { blocks, tokens: blocks.length * this.blockSize };
  }

  /** The request's blocks, in logical order. */
  blocksOf(id: number): readonly number[] {
    return this.blocks.get(id) ?? [];
  }

  cachedBlocksOf(id: number): number {
    return this.numCached.get(id) ?? 0;
  }

  /** The blocks the call needs from the queue: new ones, and the hits that sit in it. */
  private toAllocate(id: number, numTokens: number, hits: readonly number[]): number {
    const held = this.blocksOf(id).length;
    return Math.max(cdiv(numTokens, this.blockSize) - held - hits.length, 0) + this.pool.inQueue(hits);
  }

  /** The new blocks, or null (nothing changed) when the queue is too short. */
  allocateSlots(
    req: ModelVllmRequestView,
    numNewTokens: number,
    numNewComputedTokens = 0,
    newComputedBlocks: readonly number[] = [],
    fullSequenceMustFit = false,
  ): number[] | null {
    modelInt('numNewTokens', numNewTokens, 1);
    if (numNewComputedTokens !== newComputedBlocks.length * this.blockSize) throw new RangeError('model: the hit tokens and blocks disagree');
    const computed = req.numComputedTokens + numNewComputedTokens;
    if (fullSequenceMustFit && this.toAllocate(req.id, req.numTokens, newComputedBlocks) > this.pool.numFree()) return null;
    const needSlots = computed + numNewTokens;
    if (this.toAllocate(req.id, needSlots, newComputedBlocks) > this.pool.numFree()) return null;
    let blocks = this.blocks.get(req.id);
    if (blocks === undefined) this.blocks.set(req.id, (blocks = []));
    if (newComputedBlocks.length > 0) {
      this.pool.touch(newComputedBlocks);
      blocks.push(...newComputedBlocks);
      this.numCached.set(req.id, blocks.length);
    }
    const more = cdiv(needSlots, this.blockSize) - blocks.length;
    const fresh = more > 0 ? this.pool.getNewBlocks(more) : [];
    blocks.push(...fresh);
    const full = Math.floor(Math.min(needSlots, req.numTokens) / this.blockSize);
    const from = this.numCached.get(req.id) ?? 0;
    if (from < full) {
      if (req.keys.length < full) throw new RangeError(`model: request ${req.id} has ${req.keys.length} keys, ${full} blocks to cache`);
      for (let b = from; b < full; b++) this.pool.cache(blocks[b]!, req.keys[b]!);
      this.numCached.set(req.id, full);
    }
    return fresh;
  }

  free(id: number): void {
    const blocks = this.blocks.get(id) ?? [];
    this.blocks.delete(id);
    this.numCached.delete(id);
    this.pool.free([...blocks].reverse());
  }

  /** The pool's audit, then: every block's references are exactly the requests holding it. */
  check(): void {
    this.pool.check();
    const held = new Array<number>(this.pool.numBlocks).fill(0);
    for (const [id, blocks] of this.blocks) {
      for (const b of blocks) held[b]!++;
      const c = this.numCached.get(id) ?? 0;
      for (let i = 0; i < c; i++) if (this.pool.key[blocks[i]!] === null) throw new Error(`model: request ${id}'s block ${i} counts as cached but has no key`);
    }
    for (let b = 1; b < this.pool.numBlocks; b++) {
      if (held[b] !== this.pool.ref[b]) throw new Error(`model: block ${b} has ${this.pool.ref[b]} references, requests hold it ${held[b]} times`);
    }
  }
}
