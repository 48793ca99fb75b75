// Exports of vLLM's block pool (vllm-pool.ts). `p` is a pool's header
// pointer; block tables, hits and keys are regions of linear memory the
// bindings own; one call per operation.

import {
  VllmPool, poolBytes, poolCreate, poolDestroy, poolLookup, poolAllocate, poolFree, poolCheck, poolCheckHolders, poolRecord,
  poolClearEvents, freeUncached,
} from "./vllm-pool";
import { replay_prompt_tokens, replay_token_run } from "./replay-exports";
import { hashBlocksInto } from "./chain";
import {
  VP_STAT_FREE, VP_STAT_CACHED, VP_STAT_KEYS, VP_STAT_ALLOCATED, VP_STAT_EVICTED, VP_STAT_STORED, VP_STAT_CHECKSUM, VP_STAT_FREE_UNCACHED,
} from "../bindings/core/abi";

/** Bytes a pool of `numBlocks` blocks takes (arrays and header slot), as an f64. */
export function vp_region_bytes(numBlocks: i32): f64 {
  return poolBytes(numBlocks);
}

/** grows: a pool of `numBlocks` blocks (block 0 the null block), or 0 when memory is exhausted. */
export function vp_create(numBlocks: i32): usize {
  return poolCreate(numBlocks);
}

export function vp_destroy(p: usize): void {
  poolDestroy(p);
}

export function vp_lookup(p: usize, keys: usize, n: i32, out: usize): i32 {
  return poolLookup(changetype<VllmPool>(p), keys, n, out);
}

/** grows when recording events. */
export function vp_allocate(p: usize, table: usize, cap: i32, held: i32, hits: i32, need: i32, mustFit: i32, keys: usize, cacheFrom: i32, cacheTo: i32): i32 {
  return poolAllocate(changetype<VllmPool>(p), table, cap, held, hits, need, mustFit, keys, cacheFrom, cacheTo);
}

export function vp_free(p: usize, table: usize, n: i32): i32 {
  return poolFree(changetype<VllmPool>(p), table, n);
}

export function vp_num_free(p: usize): i32 {
  return changetype<VllmPool>(p).numFree;
}

/** Writes the figures as f64, VP_STAT_* order (bindings/core/abi.ts). */
export function vp_stats(p: usize, out: usize): void {
  const pool = changetype<VllmPool>(p);
  store<f64>(out + (<usize>VP_STAT_FREE << 3), <f64>pool.numFree);
  store<f64>(out + (<usize>VP_STAT_CACHED << 3), <f64>pool.numCached);
  store<f64>(out + (<usize>VP_STAT_KEYS << 3), <f64>pool.numKeys);
  store<f64>(out + (<usize>VP_STAT_ALLOCATED << 3), <f64>pool.allocated);
  store<f64>(out + (<usize>VP_STAT_EVICTED << 3), <f64>pool.evicted);
  store<f64>(out + (<usize>VP_STAT_STORED << 3), <f64>pool.stored);
  store<f64>(out + (<usize>VP_STAT_CHECKSUM << 3), <f64>pool.checksum);
  store<f64>(out + (<usize>VP_STAT_FREE_UNCACHED << 3), <f64>freeUncached(pool));
}

export function vp_check(p: usize): i32 {
  return poolCheck(changetype<VllmPool>(p));
}

export function vp_check_holders(p: usize, counts: usize): i32 {
  return poolCheckHolders(changetype<VllmPool>(p), counts);
}

/** Eviction log on (1) or off (0, forgetting it). */
export function vp_events_record(p: usize, on: i32): void {
  poolRecord(changetype<VllmPool>(p), on);
}

export function vp_events_ptr(p: usize): usize {
  return changetype<VllmPool>(p).events;
}

/** Evictions logged; -1 when some were lost (memory exhausted). */
export function vp_events_len(p: usize): i32 {
  const pool = changetype<VllmPool>(p);
  return pool.eventsLost != 0 ? -1 : pool.eventsLen;
}

export function vp_events_clear(p: usize): void {
  poolClearEvents(changetype<VllmPool>(p));
}

/**
 * A trace request's block keys (docs/replay-kernel.md, tokens and keys):
 * its `len` prompt tokens from the hash ids at `ids`, then `outputs`
 * output tokens from `firstOutput` on (wrapping from 2^31 - 1 to 2^30),
 * written at `tokens`; the chained XXH3-128 keys of their full blocks
 * (block 0 hashed alone) to `out`, 16 bytes each. Returns how many.
 */
export function vp_request_keys(ids: usize, len: i32, firstOutput: i32, outputs: i32, blockSize: i32, seedLo: u32, seedHi: u32, tokens: usize, out: usize): i32 {
  replay_prompt_tokens(ids, len, tokens);
  const straight = outputs < 0x7fffffff - firstOutput + 1 ? outputs : 0x7fffffff - firstOutput + 1;
  replay_token_run(tokens + (<usize>len << 2), firstOutput, straight);
  if (straight < outputs) replay_token_run(tokens + (<usize>(len + straight) << 2), 0x40000000, outputs - straight);
  return hashBlocksInto(tokens, len + outputs, blockSize, 0, (<u64>seedHi << 32) | <u64>seedLo, out);
}
