// The replay kernel on a HierarchyBlockManagerPool: finished sequences
// offload their computed blocks to the host tier, prompts that hit the host
// load them back, and every transfer completes at once (the worker is
// infinitely fast), so the device cache sees offloaded blocks again right
// after the sequence finishes. With a KV-cache store (`storeBlocks`), every
// offloaded block is written to the store too, and each prefill attempt first
// prefetches from the store the blocks the host lacks.

import type { HierarchyBlockManagerPool } from '../pool/hierarchy-block-manager-pool.js';
import { retentionFrom } from '../managers/retention.js';
import { Sequence, adoptBuffer } from '../pool/sequence.js';
import { checkInt } from '../validate.js';
import type { ReplayTarget } from './kernel.js';
import { advanceOutputRun, appendOutputRun, decodeStepsOf } from './output-run.js';
import type { KvStoreResult, ReplayKvStore } from './kv-store.js';
import { stageInPlainCore } from './plain-core-managers.js';

/** What the host tier did during a replay. */
export interface HostTierResult {
  /** Host blocks per dp rank, padding included. The other figures are summed over dp ranks. */
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
  /** With a KV-cache store (`storeBlocks`): what it did. */
  store?: KvStoreResult;
}

/** The replay loop's view of a HierarchyBlockManagerPool whose worker does every planned copy at once. */
export class HierarchyReplayTarget implements ReplayTarget<Sequence> {
  get blockSize(): number {
    return this.tiered.blockSize;
  }
  /** @internal The pool reads each prompt from the buffer it was given. */
  readonly holdsPrompt = true;
  /** @internal As PoolReplayTarget's: both tiers read tokens only through their core's stagings. */
  get keepsPrompt(): boolean {
    return stageInPlainCore([...this.tiered.managers, ...this.tiered.hosts]);
  }
  /**
   * `decodePriority`: as PoolReplayTarget's, for the device cache's 'priority'
   * policy; `store`: the KV-cache store behind the host (the pool was made
   * with enableKvcacheStore).
   */
  constructor(
    readonly tiered: HierarchyBlockManagerPool,
    readonly decodePriority?: number,
    readonly store?: ReplayKvStore,
  ) {
    if (decodePriority !== undefined) checkInt('decodePriority', decodePriority, 0, 100);
    // Without a store nothing sees the offloaded hashes: a finished sequence's offload completes within its release.
    if (store === undefined) tiered.completeOffloadsAtRelease();
  }
  /** The pool (what the linear-state target steps). */
  get pool(): HierarchyBlockManagerPool {
    return this.tiered;
  }
  /** Block tables of finished sequences, reused by new ones (as PoolReplayTarget does). */
  private readonly spareTables: Int32Array[] = [];
  newSequence(buffer: Int32Array, promptLength: number, outputsFrom = promptLength): Sequence {
    const s = adoptBuffer(buffer, promptLength, this.spareTables.pop());
    if (this.decodePriority !== undefined) s.state.retention = retentionFrom(outputsFrom, this.decodePriority);
    return s;
  }
  allocate(seq: Sequence, numTokens?: number): boolean {
    // A prefill attempt (the kernel passes no count) asks the store first.
    if (this.store !== undefined && numTokens === undefined) return this.prefill(seq, this.store);
    const ok = this.tiered.allocate(seq, numTokens);
    this.complete();
    return ok;
  }
  /**
   * Prefetch, then allocate. A failed attempt gives back what the prefetch
   * took (the fetched blocks stay in the host cache), so the kernel's retry
   * or rejection starts from a sequence that holds nothing.
   */
  private prefill(seq: Sequence, store: ReplayKvStore): boolean {
    const plan = this.tiered.prefetchFromStorage(seq);
    if (plan !== null) this.tiered.updatePrefetchResult(seq, store.deliver(plan.hashes));
    const ok = this.tiered.allocate(seq);
    if (!ok && seq.dpRank >= 0) this.tiered.deallocate(seq);
    this.complete();
    return ok;
  }
  /** A decode step that fits plans no copy either (the host tier's fits() waits for pending loads). */
  decodeRoom(seq: Sequence): number {
    return this.tiered.decodeRoom(seq);
  }
  /** As PoolReplayTarget's: decode steps load and offload nothing, so no copy is left to complete. */
  decodeSteps(seq: Sequence, steps: number): number {
    return decodeStepsOf(this.tiered, seq, steps);
  }
  appendOutputs(seq: Sequence, first: number, count: number): void {
    appendOutputRun(seq, first, count);
  }
  /** @internal */
  advanceOutputs(seq: Sequence, count: number): void {
    advanceOutputRun(seq, count);
  }
  cache(seq: Sequence): void {
    this.tiered.cache(seq);
  }
  deallocate(seq: Sequence): void {
    this.tiered.deallocate(seq);
    this.complete();
  }
  recycle(seq: Sequence): Int32Array {
    this.spareTables.push(seq.state.table);
    return seq.state.tokens;
  }
  blockIds(seq: Sequence): Int32Array {
    return seq.state.table;
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
  private complete(): void {
    if (!this.tiered.hasPendingTransfers()) return;
    const store = this.store;
    // Nothing reads the copies: one call completes them, the store (if any) writing the offloaded hashes first.
    if (store === undefined) this.tiered.completeTransfersNow();
    else this.tiered.completeTransfersNow((_rank, hashes) => store.writeAll(hashes));
  }
}

/** The host tier's figures after a replay, summed over dp ranks. */
export function hostTierResult(pool: HierarchyBlockManagerPool, hostBlocks: number, deviceHitBlocks: number, store?: ReplayKvStore): HostTierResult {
  const st = pool.hierarchyStats();
  const sum = (k: 'hostHitBlocks' | 'blocksLoaded' | 'blocksOffloaded') => st.reduce((a, s) => a + s[k], 0);
  return {
    hostBlocks,
    deviceHitBlocks,
    hostHitBlocks: sum('hostHitBlocks'),
    blocksLoaded: sum('blocksLoaded'),
    blocksOffloaded: sum('blocksOffloaded'),
    hostCachedBlocksAtEnd: pool.hostNumBlocksInPrefixCache().reduce((a, b) => a + b, 0),
    ...(store !== undefined && { store: store.result() }),
  };
}
