// The reference model's vLLM block pool and KVCacheManager (model/vllm/)
// behind the interface the library's vLLM scheduler calls (VllmKvCache), so
// that the same scheduler runs on the model and on the Wasm pool. Each
// request's keys are the model's own chain keys over its tokens (the
// replay kernel's tokens, computed here).

import type { VllmKvCache, VllmKvFigures } from '../../bindings/vllm/kv-cache.js';
import type { VllmRequest } from '../../bindings/vllm/request.js';
import { chainKey } from '../../model/chain-key.js';
import { modelPromptTokens } from '../../model/replay.js';
import { ModelVllmBlockPool } from '../../model/vllm/block-pool.js';
import { ModelVllmKvCacheManager } from '../../model/vllm/kv-cache-manager.js';

/** Shared by the ranks of one engine: the id checksum over every rank's pops, in order. */
export interface ModelIdChecksum {
  h: number;
}

export class ModelVllmKv implements VllmKvCache {
  readonly pool: ModelVllmBlockPool;
  readonly manager: ModelVllmKvCacheManager;
  private readonly keys = new Map<number, string[]>();
  private hits: number[] = [];
  private hitsOf = -1;
  private calls = 0;

  constructor(
    numBlocks: number,
    readonly blockSize: number,
    private readonly shared: ModelIdChecksum = { h: 0 },
  ) {
    this.pool = new ModelVllmBlockPool(numBlocks);
    this.manager = new ModelVllmKvCacheManager(this.pool, blockSize);
  }

  numFreeBlocks(): number {
    return this.pool.numFree();
  }

  /** The request's chain keys over its prompt and every output token it will give. */
  private keysOf(req: VllmRequest): string[] {
    let k = this.keys.get(req.index);
    if (k === undefined) {
      const tokens = modelPromptTokens(req.trace);
      for (let i = 0; i < req.maxOutputs; i++) tokens.push(2 ** 30 + ((req.index * 65536 + i) % 2 ** 30));
      k = [];
      let parent: string | null = null;
      for (let b = 0; (b + 1) * this.blockSize <= tokens.length; b++) k.push((parent = chainKey(parent, tokens, b * this.blockSize, (b + 1) * this.blockSize)));
      this.keys.set(req.index, k);
    }
    return k;
  }

  private view(req: VllmRequest) {
    return { id: req.index, numComputedTokens: req.numComputed, numTokens: req.numTokens, keys: this.keysOf(req) };
  }

  computedBlocks(req: VllmRequest): number {
    const { blocks } = this.manager.getComputedBlocks(this.view(req));
    this.hits = blocks;
    this.hitsOf = req.index;
    return blocks.length;
  }

  allocateSlots(req: VllmRequest, numNewTokens: number, hitBlocks: number, fullSequenceMustFit: boolean): boolean {
    this.calls++;
    if (hitBlocks > 0 && (this.hitsOf !== req.index || this.hits.length !== hitBlocks)) throw new Error('model adapter: hits not from the lookup before');
    const hits = hitBlocks > 0 ? this.hits : [];
    const fresh = this.manager.allocateSlots(this.view(req), numNewTokens, hitBlocks * this.blockSize, hits, fullSequenceMustFit);
    this.hitsOf = -1;
    if (fresh === null) return false;
    for (const id of fresh) this.shared.h = (this.shared.h * 31 + id) % 2 ** 32;
    return true;
  }

  free(req: VllmRequest): void {
    this.manager.free(req.index);
  }

  release(req: VllmRequest): void {
    this.manager.free(req.index);
    this.keys.delete(req.index);
  }

  /** The request's blocks, in logical order. */
  blocksOf(req: VllmRequest): readonly number[] {
    return this.manager.blocksOf(req.index);
  }

  check(): void {
    this.manager.check();
  }

  figures(): VllmKvFigures {
    const cached = this.pool.cachedBlocks();
    return {
      evictedBlocks: this.pool.evicted,
      allocatedBlocks: this.pool.allocated,
      idChecksum: this.pool.checksum,
      freeBlocksAtEnd: this.pool.numFree() - cached + this.heldCached(),
      cachedBlocksAtEnd: cached,
      cachedKeysAtEnd: this.pool.cached.size,
      allocateCalls: this.calls,
    };
  }

  /** Cached blocks a request still holds (not in the queue). */
  private heldCached(): number {
    let n = 0;
    for (let id = 1; id < this.pool.numBlocks; id++) if (this.pool.ref[id]! > 0 && this.pool.key[id] !== null) n++;
    return n;
  }
}
