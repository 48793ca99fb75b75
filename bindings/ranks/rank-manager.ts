// The one seam between the pool and a data-parallel rank. The pool decides
// where a sequence goes and owns single ids; everything a rank does with
// blocks goes through this interface. Each rank kind implements it (one block
// table: block-table-rank.ts; composite tables: composite-rank.ts), the host
// tier wraps a rank (host-tier-rank.ts), and concurrency is one decorator
// around any rank (locked-rank.ts). A new variant is a new file here.

import type { BlockManagerStats } from '../managers/block-manager.js';
import type { KVEventRecordVisitor, RecordEventsOptions } from '../managers/kv-events.js';
import type { PoolManager } from '../managers/pool-manager.js';
import type { LinearStateAddOn } from './linear-state-add-on.js';
import type { SequenceState } from './sequence-state.js';
import type { CoreBytes } from '../core/core-instance.js';

/** A pending block copy of a beam-search swap: the worker copies `src` into `dst`. */
export interface BlockTransferInfo {
  readonly src: number;
  readonly dst: number;
}

/** The kinds of rank a pool can be made of. */
export type RankKind = 'plain' | 'composite' | 'xtensor';

export interface RankManager {
  readonly kind: RankKind;
  /** Tokens per block of a sequence's block table (`Sequence.blockTable`). */
  readonly blockSize: number;
  /** Whether full blocks are shared through a prefix cache on this rank. */
  readonly prefixCache: boolean;
  /** The KV manager the rank's figures and views come from (a composite: its capacity sub-manager). */
  readonly kv: PoolManager;
  /** Linear-state checkpoints and live slots, when the rank carries them. */
  readonly linear: LinearStateAddOn | null;
  /** Beam-search copies made by swaps and not taken yet. */
  readonly transfers: BlockTransferInfo[];

  /**
   * Begins one operation of several calls: a concurrent rank takes its locks
   * (throwing, before anything changed, when they time out) and holds them
   * until the matching `exit`. Other ranks do nothing.
   */
  enter(): void;
  exit(): void;
  /**
   * Throws, before anything changes, when growing `s` to `numTokens` would be
   * refused (the host tier's load plans check their targets here).
   */
  precheck(s: SequenceState, numTokens: number, maxCopyBlocks?: number): void;
  /** True when growing `s` to `numTokens` needs nothing of the rank (a decode step that fits). */
  fits(s: SequenceState, numTokens: number): boolean;
  /**
   * Grows `s`'s tables to cover `numTokens`, all or nothing; a sequence that
   * holds no blocks first takes its prefix-cache hits. `maxCopyBlocks` bounds
   * the host tier's loads of this step (chunked prefill). False when short of
   * blocks: `s` is then as before (what eviction did on the way stays done).
   */
  allocate(s: SequenceState, numTokens: number, maxCopyBlocks?: number): boolean;
  /**
   * @internal `k` allocate() calls in a row that each need one block more
   * than `s` holds, made as one core call (see BlockTableRank.growSteps), for
   * a sequence whose current tokens fit as is; -1 when the rank cannot.
   * Absent on ranks that make them one at a time.
   */
  growSteps?(s: SequenceState, k: number): number;
  /**
   * @internal Decode steps `s` can take that each need nothing of the rank
   * (step t grows it to numTokens + t with kvCached one behind), for ranks
   * where fits() cannot say it alone (a window's blocks slide out). Absent
   * on ranks where fits() for the held capacity answers it.
   */
  decodeRoom?(s: SequenceState): number;
  /** Matches more of the prompt if `s` holds only shared blocks, then allocates the rest; kvCached = numTokens. */
  tryAllocate(s: SequenceState): boolean;
  /** Attaches the prefix-cache hits of a sequence that holds no blocks. */
  allocateShared(s: SequenceState): void;
  /** Caches the full blocks of tokens [0, numTokens) after the shared prefix. */
  cache(s: SequenceState, numTokens: number): void;
  /** Lets go of everything `s` holds on the rank, caching its computed blocks first when asked. */
  release(s: SequenceState, cacheFirst: boolean): void;
  /** `child` (a copy of `parent`'s tables) takes a reference on each of their blocks. */
  fork(parent: SequenceState, child: SequenceState): void;
  /**
   * Beam search: `child` takes a reference on each of `source`'s blocks now;
   * its next allocation drops its own blocks and continues on these (copying
   * the last one first when `swap`). Throws on a rank that keeps no beams.
   */
  adoptBeam(child: SequenceState, source: SequenceState, swap: boolean): void;
  /** True when `s` holds a block of the rank. */
  holds(s: SequenceState): boolean;
  /** Chain hashes at the first `nBlocks` block boundaries of `s` (16 bytes each). */
  prefixHashes(s: SequenceState, nBlocks: number): Uint8Array;
  /**
   * @internal prefixHashes left in a core's staging memory (valid until its
   * next staging), `extra` more bytes reserved right after them; null when
   * the rank cannot (then prefixHashes). Absent on ranks that never can.
   */
  prefixHashesIn?(s: SequenceState, nBlocks: number, extra: number): CoreBytes | null;

  numFreeBlocks(): number;
  numUsedBlocks(): number;
  numBlocksInPrefixCache(): number;
  kvCacheUtilization(): number;
  stats(): BlockManagerStats;
  recordEvents(on: boolean, options?: RecordEventsOptions): void;
  /** Hands each of the rank's event sources' records to `visit` (device first, then host), then forgets them. */
  drainEventRecords(visit: KVEventRecordVisitor): void;
  /** Hands `visit` a snapshot of each source's announced cache (see CoreManager.snapshotEvents). */
  snapshotEventRecords(visit: KVEventRecordVisitor): void;
  resetPrefixCache(): number;
  /** The priority policy's clock (0 without it). */
  time(): number;
  setTime(t: number): void;
  /**
   * Audits the rank (number `rank`, for messages) against the sequences
   * placed on it and `extra`, the references the pool's caller holds on its
   * KV manager's blocks (index = id).
   */
  check(placed: readonly SequenceState[], rank: number, extra: Int32Array): void;
  dispose(): void;
}
