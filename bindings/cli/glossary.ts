// What every field of a replay result means: one source for the table's
// labels, `--help` and the documentation (docs/replay.md lists the same
// fields; a test checks that none is missing there).

export interface GlossaryEntry {
  /** Dotted path in the JSON result (`hostTier.blocksLoaded`), also the CSV column. */
  key: string;
  /** Row label in the table. */
  label: string;
  meaning: string;
}

/** The figures of every mode, in table order. */
export const RESULT_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'mode', label: 'mode', meaning: 'plain, linear-state, composite or host-tier: which parts the result has' },
  { key: 'requests', label: 'requests', meaning: 'requests read from the trace (after --limit), rejected ones included' },
  { key: 'rejected', label: 'rejected', meaning: 'requests whose prompt could not be placed even with no other sequence running (too big for a rank)' },
  { key: 'truncated', label: 'truncated', meaning: 'requests that stopped decoding early because no block was left for the next token' },
  { key: 'promptBlocks', label: 'prompt blocks', meaning: 'full prompt blocks (prompt tokens / block size, rounded down) of the requests placed' },
  { key: 'matchedBlocks', label: 'matched blocks', meaning: 'prompt blocks found in the prefix cache instead of computed (prefix-cache hits)' },
  { key: 'hitRate', label: 'hit rate', meaning: 'matched blocks / prompt blocks (a fraction in JSON and CSV, a percentage in the table)' },
  { key: 'evictedBlocks', label: 'evicted blocks', meaning: 'prefix-cache entries evicted to make room, failed allocations included' },
  { key: 'allocatedBlocks', label: 'allocated blocks', meaning: 'block ids handed out from the free stack over the run (padding excluded)' },
  { key: 'idChecksum', label: 'id checksum', meaning: 'h = (h * 31 + id) mod 2^32 over every id handed out, in order: equal checksums mean the same ids in the same order' },
  { key: 'freeBlocksAtEnd', label: 'free blocks at end', meaning: 'ids on the free stacks after the last sequence finished (padding excluded)' },
  { key: 'cachedBlocksAtEnd', label: 'cached blocks at end', meaning: 'prefix-cache entries at the end (with the free blocks: every block but the padding)' },
  { key: 'seconds', label: 'loop seconds', meaning: 'wall time of the replay loop alone (reading the trace excluded)' },
  { key: 'allocateCallsPerSecond', label: 'allocate calls / s', meaning: 'pool allocate calls (failed ones and decode steps needing no block included) per loop second' },
  { key: 'linearState.checkpointHits', label: 'checkpoint hits', meaning: 'linear state: prefills that restored the recurrent state from a checkpoint' },
  { key: 'linearState.checkpointsSaved', label: 'checkpoints saved', meaning: 'linear state: checkpoints committed at block boundaries' },
  { key: 'linearState.checkpointEvictions', label: 'checkpoint evictions', meaning: 'linear state: checkpoints evicted to free a slot' },
  { key: 'linearState.trimmedBlocks', label: 'blocks trimmed (no checkpoint)', meaning: 'linear state: prefix-cache hits given back because no checkpoint covered their boundary' },
  { key: 'hostTier.hostBlocks', label: 'host blocks', meaning: 'host tier: host blocks per dp rank, padding included' },
  { key: 'hostTier.deviceHitBlocks', label: 'device hit blocks', meaning: 'host tier: prompt blocks found on the device (= matched blocks)' },
  { key: 'hostTier.hostHitBlocks', label: 'host hit blocks', meaning: 'host tier: prompt blocks found in the host cache, whether the device had them or not' },
  { key: 'hostTier.blocksLoaded', label: 'blocks loaded', meaning: 'host tier: host hits the device lacked, copied in instead of recomputed' },
  { key: 'hostTier.blocksOffloaded', label: 'blocks offloaded', meaning: 'host tier: computed blocks copied to the host when their sequence finished' },
  { key: 'hostTier.hostCachedBlocksAtEnd', label: 'host cached at end', meaning: 'host tier: host cache entries at the end' },
  { key: 'hostTier.store.storeBlocks', label: 'store blocks', meaning: 'KV-cache store: blocks it holds at most' },
  { key: 'hostTier.store.blocksWritten', label: 'store writes', meaning: 'KV-cache store: offloaded blocks written to it (rewrites included)' },
  { key: 'hostTier.store.blocksRequested', label: 'store requests', meaning: 'KV-cache store: blocks prefetches asked for (the host lacked them)' },
  { key: 'hostTier.store.blocksDelivered', label: 'store deliveries', meaning: 'KV-cache store: of those, blocks it delivered into the host' },
  { key: 'hostTier.store.blocksEvicted', label: 'store evictions', meaning: 'KV-cache store: blocks dropped to make room (least recently used first)' },
  { key: 'hostTier.store.blocksAtEnd', label: 'store blocks at end', meaning: 'KV-cache store: blocks held at the end' },
];

/** Rows of the per-sub-manager table of a composite replay (`subManagers` in JSON). */
export const SUB_MANAGER_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'subManagers[].kind', label: 'kind', meaning: 'sliding-window or full' },
  { key: 'subManagers[].blockSize', label: 'block size', meaning: 'tokens per block of this sub-manager' },
  { key: 'subManagers[].numBlocks', label: 'blocks', meaning: 'its blocks per rank, padding included' },
  { key: 'subManagers[].peakUsedBlocks', label: 'peak used', meaning: 'the most ids held at once (summed over ranks)' },
  { key: 'subManagers[].allocatedBlocks', label: 'allocated', meaning: 'ids handed out over the run' },
  { key: 'subManagers[].releasedBlocks', label: 'released', meaning: 'ids given back because they slid out of the window' },
];

/** Rows of the per-rank table (`ranks` in JSON; printed when --dp-size > 1). */
export const RANK_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'ranks[].dpRank', label: 'rank', meaning: 'the dp rank' },
  { key: 'ranks[].lookups', label: 'lookups', meaning: 'prefix-cache lookups on this rank (one per prefill attempt)' },
  { key: 'ranks[].queriedBlocks', label: 'queried', meaning: 'full prompt blocks looked up' },
  { key: 'ranks[].hitBlocks', label: 'hits', meaning: "blocks found (the pool's counter: an exact-prompt hit's given-back block included)" },
  { key: 'ranks[].evictedBlocks', label: 'evicted', meaning: 'prefix-cache entries evicted on this rank' },
  { key: 'ranks[].allocatedBlocks', label: 'allocated', meaning: 'ids handed out on this rank' },
  { key: 'ranks[].peakUsedBlocks', label: 'peak used', meaning: 'the most blocks held by sequences at once' },
];

/** The configuration every result echoes (`config` in JSON). */
export const CONFIG_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'config.trace', label: 'trace', meaning: 'the trace file or built-in name, or "workload" (the generated one)' },
  { key: 'config.requests', label: 'workload requests', meaning: 'requests of the generated workload (null with a trace)' },
  { key: 'config.limit', label: 'limit', meaning: 'only the first N requests (null: all)' },
  { key: 'config.blockSize', label: 'block size', meaning: 'tokens per KV block' },
  { key: 'config.numBlocks', label: 'blocks per rank', meaning: 'physical blocks per dp rank, padding included' },
  { key: 'config.dpSize', label: 'dp size', meaning: 'data-parallel ranks' },
  { key: 'config.maxRunning', label: 'max running', meaning: 'sequences held at once' },
  { key: 'config.seed', label: 'seed', meaning: 'seed of the block hash chain (and of the generated workload)' },
  { key: 'config.publishAfterPrefill', label: 'publish after prefill', meaning: 'prompt blocks enter the prefix cache while the sequence runs' },
  { key: 'config.eviction', label: 'eviction', meaning: 'lru, lfu or priority' },
  { key: 'config.hostBlocks', label: 'host blocks', meaning: 'host-tier blocks per rank (0: no host tier)' },
  { key: 'config.storeBlocks', label: 'store blocks', meaning: 'blocks of the KV-cache store behind the host tier (null: no store)' },
  { key: 'config.slidingWindow', label: 'sliding window', meaning: 'tokens of the window of a composite pool (null: not composite)' },
  { key: 'config.compressRatios', label: 'compress ratios', meaning: "the composite pool's full sub-managers" },
  { key: 'config.linearStateSlots', label: 'linear-state slots', meaning: 'checkpoint slots per rank (null: no linear state)' },
];

/** `--help` text: every field, one line each. */
export function glossaryHelp(): string {
  const all = [...RESULT_GLOSSARY, { key: 'warnings', label: '', meaning: 'notes on a result that is probably not what was meant (also on stderr)' }];
  const w = Math.max(...all.map((e) => e.key.length));
  return ['', 'Result fields (JSON keys; the table uses the same words):', ...all.map((e) => `  ${e.key.padEnd(w)}  ${e.meaning}`),
    '', '`ranks` has each dp rank\'s pool counters (the table shows them when --dp-size > 1); a composite replay adds `subManagers`.',
    'Every output echoes the configuration (`config`). Details: docs/replay.md.'].join('\n');
}
