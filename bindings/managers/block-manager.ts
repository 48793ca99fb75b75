// The allocator-level interface (docs/managers.md): "give me N block ids".

/** Counters of one manager, as returned by `stats()`. */
export interface BlockManagerStats {
  /** Ids on the free stack. */
  numFreeBlocks: number;
  /** Ids held by anything other than the prefix cache (sequences, plans, forks). */
  numUsedBlocks: number;
  /** Prefix-cache entries (each one block). */
  numBlocksInPrefixCache: number;
  /** Usable ids: numBlocks - 1 (id 0 is the padding block). */
  numTotalBlocks: number;
  /** Cached entries nothing else holds: what eviction can take. */
  numEvictableBlocks: number;
  /** `allocateShared` calls. */
  matchCalls: number;
  /** Full blocks looked up by `allocateShared`. */
  blocksQueried: number;
  /** Blocks `allocateShared` found in the cache. */
  blocksHit: number;
  /** New prefix-cache entries made by `cache`. */
  blocksInserted: number;
  /** Entries evicted (by `evict` or by an allocation that needed room). */
  blocksEvicted: number;
  /** Ids handed out by `allocate` (padding excluded). */
  blocksAllocated: number;
  /** `allocate` calls that returned `null`. */
  allocationFailures: number;
  /** The most ids ever used at once (numUsedBlocks' high-water mark). */
  peakUsedBlocks: number;
}

/**
 * A physical block allocator. Every id handed out is owned by the caller once;
 * `deallocate` lets one holder go, and the id returns to the free stack only
 * when no holder (the prefix cache included) is left.
 */
export interface BlockManager {
  /** Tokens per block. */
  readonly blockSize: number;
  /** Physical ids, padding id 0 included. */
  readonly numBlocks: number;
  /** `n` fresh ids, each owned once by the caller, or `null` when there are not enough. */
  allocate(n: number): Int32Array | null;
  /** The caller lets go of one reference per listed id (duplicates count twice). */
  deallocate(ids: ArrayLike<number>): void;
  /** Adds a holder to each listed id (e.g. a forked sequence). */
  retain(ids: ArrayLike<number>): void;
  /**
   * Ids of cached blocks matching the full blocks of `tokens` after the
   * `existingShared` ids the caller already holds, one reference added to each.
   */
  allocateShared(tokens: ArrayLike<number>, existingShared?: ArrayLike<number>): Int32Array;
  /**
   * Caches the full blocks of `tokens` held in `ids` (from index
   * `existingSharedCount` on); returns how many became new cache entries.
   */
  cache(tokens: ArrayLike<number>, ids: ArrayLike<number>, existingSharedCount?: number): number;
  /** Evicts up to `n` least recent unheld cache entries; returns how many. */
  evict(n: number): number;
  numFreeBlocks(): number;
  numUsedBlocks(): number;
  numBlocksInPrefixCache(): number;
  numTotalBlocks(): number;
  /** used / total. */
  kvCacheUtilization(): number;
  stats(): BlockManagerStats;
  /** Audits the whole state; throws an Error naming what is inconsistent. */
  check(): void;
}
