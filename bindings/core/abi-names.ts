// What the core's numeric codes mean to a person: audit codes as messages,
// stats indexes as field names. The codes themselves are in abi.ts.

import * as A from './abi.js';

/** What each mgr_check / ls_check code means. */
export const CHECK_MESSAGES: Readonly<Record<number, string>> = {
  [A.CHECK_FREE_SIZE]: 'free-stack size out of range',
  [A.CHECK_FREE_RANGE]: 'free stack holds an id out of range or the padding id',
  [A.CHECK_FREE_TWICE]: 'free stack holds an id twice',
  [A.CHECK_FREE_HELD]: 'a free id still has references or is cached',
  [A.CHECK_LOST]: 'an id is neither free nor referenced (lost)',
  [A.CHECK_PADDING]: 'padding block 0 is not reserved',
  [A.CHECK_USED]: 'used count does not match the ids held outside the prefix cache',
  [A.CHECK_CACHED]: 'prefix-cache size does not match the cached ids',
  [A.CHECK_TABLE]: 'hash table and cached ids disagree',
  [A.CHECK_HEADER]: 'the header is not a live manager (destroyed, or not a header at all)',
  [A.CHECK_ORDER]: 'eviction order (recency ring or side heap) is corrupt, or the evictable count is wrong',
  [A.CHECK_ORDER_MEMBERS]: 'an evictable entry is missing from the eviction order, or an uncached id is in it',
  [A.CHECK_FUTURE]: 'an entry has a recency from the future',
  [A.CHECK_NO_CACHE]: 'a manager without prefix cache has cached ids',
  [A.CHECK_TOLD]: 'an id announced to event consumers is not cached',
  [A.CHECK_RETENTION]: 'the retention heap of the priority policy is corrupt or holds an expired retention',
  [A.CHECK_SLOT_STATE]: 'a linear-state slot is in no consistent state',
  [A.CHECK_QUEUE]: 'the free queue is broken (its links, or its length)',
  [A.CHECK_QUEUE_MEMBERS]: 'a block without references is not in the free queue, or one with references is',
  [A.CHECK_KEYS]: 'the key table and the cached blocks disagree',
  [A.CHECK_HOLDERS]: 'a block\'s references are not the requests holding it',
};

/** The f64 counters mgr_stats writes, by index (STAT_* in abi.ts). */
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

// Each name at its index: a reordering on either side fails to type-check or at load.
const STAT_INDEX: Record<(typeof STAT_FIELDS)[number], number> = {
  numFreeBlocks: A.STAT_FREE,
  numUsedBlocks: A.STAT_USED,
  numBlocksInPrefixCache: A.STAT_CACHED,
  numTotalBlocks: A.STAT_TOTAL,
  numEvictableBlocks: A.STAT_EVICTABLE,
  matchCalls: A.STAT_MATCH_CALLS,
  blocksQueried: A.STAT_BLOCKS_QUERIED,
  blocksHit: A.STAT_BLOCKS_HIT,
  blocksInserted: A.STAT_BLOCKS_INSERTED,
  blocksEvicted: A.STAT_BLOCKS_EVICTED,
  blocksAllocated: A.STAT_BLOCKS_ALLOCATED,
  allocationFailures: A.STAT_ALLOCATION_FAILURES,
  peakUsedBlocks: A.STAT_PEAK_USED,
};
if (STAT_FIELDS.length !== A.STAT_COUNT || STAT_FIELDS.some((k, i) => STAT_INDEX[k] !== i)) {
  throw new Error('kvpool: STAT_FIELDS disagrees with the STAT_* indexes of bindings/core/abi.ts');
}
