// The replay kernel on a HierarchyBlockManagerPool: finished sequences
// offload their computed blocks to the host tier, prompts that hit the host
// load them back, and every transfer completes at once (the worker is
// infinitely fast), so the device cache sees offloaded blocks again right
// after the sequence finishes.

import { HierarchyBlockManagerPool } from '../pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../pool/sequence.js';
import { runReplay, type ReplayParams, type ReplayProgress, type ReplayResult, type ReplayTarget } from './kernel.js';
import type { TraceRequest } from './trace.js';

/** What the host tier did during a replay. */
export interface HostTierResult {
  /** Host blocks per dp rank, padding included. */
  hostBlocks: number;
  /** Prompt blocks found in the device prefix cache (the result's matchedBlocks). */
  deviceHitBlocks: number;
  /** Prompt blocks found in the host prefix cache (whether the device had them or not). */
  hostHitBlocks: number;
  /** Host hits the device lacked, copied host to device instead of recomputed. */
  blocksLoaded: number;
  /** Computed blocks copied device to host when their sequence finished. */
  blocksOffloaded: number;
  /** Host cache entries at the end. */
  hostCachedBlocksAtEnd: number;
}

export type HierarchyReplayResult = ReplayResult & { hostTier: HostTierResult };

class HierarchyReplayTarget implements ReplayTarget<Sequence> {
  constructor(readonly tiered: HierarchyBlockManagerPool) {}
  newSequence(buffer: Int32Array, promptLength: number): Sequence {
    return Sequence.fromBuffer(buffer, promptLength);
  }
  allocate(seq: Sequence, numTokens?: number): boolean {
    const ok = this.tiered.allocate(seq, numTokens);
    this.complete();
    return ok;
  }
  cache(seq: Sequence): void {
    this.tiered.cache(seq);
  }
  deallocate(seq: Sequence): void {
    this.tiered.deallocate(seq);
    this.complete();
  }
  blocksEvicted(): number {
    return this.tiered.stats().reduce((a, s) => a + s.blocksEvicted, 0);
  }
  numFreeBlocks(): number {
    return this.tiered.numFreeBlocks().reduce((a, b) => a + b, 0);
  }
  numBlocksInPrefixCache(): number {
    return this.tiered.numBlocksInPrefixCache().reduce((a, b) => a + b, 0);
  }
  /** The worker does every planned copy at once. */
  private complete(): void {
    if (!this.tiered.hasPendingTransfers()) return;
    for (const t of this.tiered.takeTransfers()) if (t.offload) this.tiered.completeOffload(t.offload);
  }
}

export interface HierarchyReplayParams extends ReplayParams {
  numBlocks: number;
  hostBlocks: number;
  seed: number;
}

/** Runs the replay kernel with a host tier of `hostBlocks` blocks. */
export function replayWithHostTier(
  trace: readonly TraceRequest[],
  p: HierarchyReplayParams,
  onProgress?: ReplayProgress,
): HierarchyReplayResult {
  const pool = new HierarchyBlockManagerPool({ numBlocks: p.numBlocks, blockSize: p.blockSize, seed: p.seed, hostNumBlocks: p.hostBlocks });
  try {
    const result = runReplay(new HierarchyReplayTarget(pool), trace, p, onProgress);
    const st = pool.hierarchyStats()[0]!;
    return {
      ...result,
      hostTier: {
        hostBlocks: p.hostBlocks,
        deviceHitBlocks: result.matchedBlocks,
        hostHitBlocks: st.hostHitBlocks,
        blocksLoaded: st.blocksLoaded,
        blocksOffloaded: st.blocksOffloaded,
        hostCachedBlocksAtEnd: pool.hostNumBlocksInPrefixCache()[0]!,
      },
    };
  } finally {
    pool.dispose();
  }
}
