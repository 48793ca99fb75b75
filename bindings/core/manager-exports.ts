// Raw block-manager exports of the core (assembly/manager-exports.ts).

export interface ManagerExports {
  /** grows: header pointer of a new manager, 0 when memory is exhausted */
  mgr_create(numBlocks: number, blockSize: number, prefixOn: number, seedLo: number, seedHi: number): number;
  mgr_destroy(m: number): void;
  /** grows: eviction policy of a manager with an empty cache (0 LRU, 1 LFU, 2 priority); -1 refused, -2 memory exhausted */
  mgr_set_policy(m: number, policy: number): number;
  mgr_policy(m: number): number;
  /** Moves the priority clock forward; -1 when `t` is before the current time. */
  mgr_set_time(m: number, t: number): number;
  mgr_time(m: number): number;
  /** (f64 priority, f64 expiry) per position of the next insert's batch; 0 unless the priority policy is on. */
  mgr_batch_ptr(m: number): number;
  mgr_allocate(m: number, n: number, out: number): number;
  mgr_release(m: number, ids: number, n: number): number;
  mgr_retain(m: number, ids: number, n: number): number;
  /** flags: MATCH_TOUCH | MATCH_COUNT; `queried` is added to blocksQueried when counted */
  mgr_match(m: number, tokens: number, nBlocks: number, parentId: number, parentPtr: number, out: number, flags: number, queried: number): number;
  mgr_touch_reversed(m: number, ids: number, n: number): void;
  /** `known`: leading blocks whose key is the hash stamped on their id (not hashed again). */
  mgr_insert(m: number, tokens: number, ids: number, nBlocks: number, parentId: number, parentPtr: number, known: number): number;
  mgr_evict(m: number, k: number): number;
  mgr_evict_all(m: number): number;
  mgr_num_free(m: number): number;
  mgr_num_used(m: number): number;
  mgr_num_cached(m: number): number;
  mgr_ref(m: number, id: number): number;
  mgr_block_hash(m: number, id: number, out: number): number;
  /** Per-id reference counts (i32 each). */
  mgr_refs_ptr(m: number): number;
  /** Per-id recency stamps (u32 each; 0 without caching). */
  mgr_stamps_ptr(m: number): number;
  /** Per-id flag bytes (FLAG_CACHED, ...). */
  mgr_flags_ptr(m: number): number;
  /** Cold per-id fields: id i at aux + i * AUX.size; 0 without caching. */
  mgr_aux_ptr(m: number): number;
  /** Test hook: moves the recency clock forward (to reach the u32 stamps' renumbering). */
  mgr_set_clock(m: number, v: number): void;
  mgr_free_ptr(m: number): number;
  mgr_error_index(): number;
  mgr_stats(m: number, out: number): void;
  mgr_check(m: number): number;
  /** Event recording on (1) / off (0); recording calls may grow memory. */
  mgr_events_record(m: number, on: number): void;
  mgr_events_ptr(m: number): number;
  /** Bytes recorded, -1 when some records were lost (memory exhausted). */
  mgr_events_len(m: number): number;
  mgr_events_clear(m: number): void;
}

/** The cold per-id fields: stride and the policy key's offset (AUX_* in assembly/layout.ts). */
export const AUX = { size: 24, key: 4 } as const;
export const FLAG_CACHED = 1;

/** Order of the f64 counters written by mgr_stats. */
export const STAT_FIELDS = [
  'numFreeBlocks',
  'numUsedBlocks',
  'numBlocksInPrefixCache',
  'numTotalBlocks',
  'numEvictableBlocks',
  'matchCalls',
  'blocksQueried',
  'blocksHit',
  'blocksInserted',
  'blocksEvicted',
  'blocksAllocated',
  'allocationFailures',
  'peakUsedBlocks',
] as const;

export const MATCH_TOUCH = 1;
export const MATCH_COUNT = 2;

export const ERR_UNSTAMPED_PARENT = -2;
export const ERR_OUT_OF_RANGE = -3;
export const ERR_PADDING = -4;
export const ERR_NOT_HELD = -5;
export const ERR_FREE = -6;

/** What each mgr_check code means. */
export const CHECK_MESSAGES: Record<number, string> = {
  [-10]: 'free-stack size out of range',
  [-11]: 'free stack holds an id out of range or the padding id',
  [-12]: 'free stack holds an id twice',
  [-13]: 'a free id still has references or is cached',
  [-14]: 'an id is neither free nor referenced (lost)',
  [-15]: 'padding block 0 is not reserved',
  [-16]: 'used count does not match the ids held outside the prefix cache',
  [-17]: 'prefix-cache size does not match the cached ids',
  [-18]: 'hash table and cached ids disagree',
  [-20]: 'eviction order (recency ring or side heap) is corrupt, or the evictable count is wrong',
  [-21]: 'an evictable entry is missing from the eviction order, or an uncached id is in it',
  [-22]: 'an entry has a recency from the future',
  [-23]: 'a manager without prefix cache has cached ids',
  [-24]: 'an id announced to event consumers is not cached',
  [-25]: 'the retention heap of the priority policy is corrupt or holds an expired retention',
};
