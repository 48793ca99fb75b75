// What BlockManagerPool needs of a rank's KV block manager: the BlockManager
// calls plus the zero-allocation paths it uses on every step and the views
// its audit reads. BlockManagerImpl (core-backed) and XTensorBlockManagerImpl
// (mapped pages) both provide it.

import type { BlockManager } from './block-manager.js';
import type { KVEvent, KVEventRecordVisitor, KVEventSource, RecordEventsOptions } from './kv-events.js';

export interface PoolManager extends BlockManager {
  /** @internal Writes `n` fresh ids to dst[at..]; false (nothing changed) when short. */
  allocateInto(n: number, dst: Int32Array, at: number): boolean;
  /** @internal Drops one reference on each of ids[start..end); 0 or a negative code (nothing changed). */
  releaseFrom(ids: Int32Array, start: number, end: number): number;
  /** @internal Adds one reference to each of ids[start..end); 0 or a negative code. */
  retainFrom(ids: Int32Array, start: number, end: number): number;
  /** @internal Prefix-cache hits written to dst[at..] (0 without a prefix cache). */
  matchInto(
    tokens: ArrayLike<number>, first: number, nBlocks: number, parentId: number, dst: Int32Array, at: number,
    salt?: Uint8Array | null,
  ): number;
  /**
   * @internal New prefix-cache entries (0 without a prefix cache). `known`:
   * leading blocks whose ids carry the hash these tokens give (not hashed again).
   */
  insertFrom(
    tokens: ArrayLike<number>, ids: ArrayLike<number>, first: number, nBlocks: number, parentId: number,
    salt?: Uint8Array | null, known?: number,
  ): number;
  /** The 16-byte chain hash stamped on `id`, or null (always null without a prefix cache). */
  blockHash(id: number): Uint8Array | null;
  /** Starts or stops recording KV-cache events (nothing to record without a prefix cache). */
  recordEvents(on: boolean, options?: RecordEventsOptions): void;
  /** Returns and forgets the events recorded so far, tagged with `dpRank`, appended to `out`. */
  drainEvents(dpRank?: number, out?: KVEvent[]): KVEvent[];
  /** @internal Hands the raw records to `visit`, tagged with `source`, then forgets them. */
  drainEventRecords(source: KVEventSource, visit: KVEventRecordVisitor): void;
  /** @internal Hands `visit` the records of a snapshot of the announced cache; pending records stay. */
  snapshotEventRecords(source: KVEventSource, visit: KVEventRecordVisitor): void;
  /** Evicts every entry nothing else holds; returns how many. */
  resetPrefixCache(): number;
  /** Holders of every id other than the prefix cache (index = id). */
  holderCounts(): Int32Array;
  /** Every id's BlockState code in one pass (views such as the pool inspector). */
  blockStates(out?: Uint8Array): Uint8Array;
  freeIds(): Int32Array;
  lruOrder(): Int32Array;
  refCount(id: number): number;
  dispose(): void;
}
