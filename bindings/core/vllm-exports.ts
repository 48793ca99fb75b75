// Raw exports of vLLM's block pool (assembly/vllm-exports.ts).

export interface VllmExports {
  /** Bytes a pool of `numBlocks` blocks takes (arrays and header slot), as an f64. */
  vp_region_bytes(numBlocks: number): number;
  /** grows: header pointer of a new pool, 0 when memory is exhausted */
  vp_create(numBlocks: number): number;
  vp_destroy(p: number): void;
  /** get_computed_blocks over `n` keys (16 bytes each): the hit ids to `out`; returns how many. */
  vp_lookup(p: number, keys: number, n: number, out: number): number;
  /** grows when recording: allocate_slots on a block table (see assembly/vllm-pool.ts); the new length, VP_NO_ROOM, or an error code. */
  vp_allocate(p: number, table: number, cap: number, held: number, hits: number, need: number, mustFit: number, keys: number, cacheFrom: number, cacheTo: number): number;
  /** free_blocks of a table's `n` blocks, last first; 0 or an error code. */
  vp_free(p: number, table: number, n: number): number;
  vp_num_free(p: number): number;
  /** Figures as f64, VP_STAT_* order. */
  vp_stats(p: number, out: number): void;
  vp_check(p: number): number;
  /** Each block's references against `counts` (i32 per block). */
  vp_check_holders(p: number, counts: number): number;
  vp_events_record(p: number, on: number): void;
  vp_events_ptr(p: number): number;
  /** Evictions logged, -1 when some were lost. */
  vp_events_len(p: number): number;
  vp_events_clear(p: number): void;
  /** A trace request's tokens written at `tokens` and its full blocks' chain keys to `out`; returns how many keys. */
  vp_request_keys(ids: number, len: number, firstOutput: number, outputs: number, blockSize: number, seedLo: number, seedHi: number, tokens: number, out: number): number;
}
