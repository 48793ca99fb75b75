// Raw block-manager exports of the core (assembly/manager-exports.ts).

export interface ManagerExports {
  /** grows: header pointer of a new manager (a slot of the handle table), 0 when memory is exhausted */
  mgr_create(numBlocks: number, blockSize: number, prefixOn: number, seedLo: number, seedHi: number): number;
  /** Bytes a manager of `numBlocks` ids takes (arrays and header slot), as an f64. */
  mgr_region_bytes(numBlocks: number, prefixOn: number): number;
  mgr_destroy(m: number): void;
  /** 1 when `m` is the header of a live object of kind `magic` (MAGIC_*) and generation `gen`. */
  obj_valid(m: number, gen: number, magic: number): number;
  /** grows: eviction policy of a manager with an empty cache (0 LRU, 1 LFU, 2 priority); -1 refused, -2 memory exhausted */
  mgr_set_policy(m: number, policy: number): number;
  mgr_policy(m: number): number;
  /** Moves the priority clock forward; -1 when `t` is before the current time. */
  mgr_set_time(m: number, t: number): number;
  mgr_time(m: number): number;
  /** (f64 priority, f64 expiry) per position of the next insert's batch; 0 unless the priority policy is on. */
  mgr_batch_ptr(m: number): number;
  /** Stages (priority, expiry) on batch positions [from, to) and the default on the rest of [0, n), clamped to the batch; nothing unless the priority policy is on. */
  mgr_stage_retention(m: number, n: number, from: number, to: number, priority: number, expiry: number): void;
  mgr_allocate(m: number, n: number, out: number): number;
  /** `k` one-id allocations in a row (ids to out, in step order), stopping at the first that fails; returns how many were made. */
  mgr_allocate_steps(m: number, k: number, out: number): number;
  mgr_release(m: number, ids: number, n: number): number;
  mgr_retain(m: number, ids: number, n: number): number;
  /** flags: MATCH_TOUCH | MATCH_COUNT; `queried` is added to blocksQueried when counted */
  mgr_match(m: number, tokens: number, nBlocks: number, parentId: number, parentPtr: number, out: number, flags: number, queried: number): number;
  mgr_touch_reversed(m: number, ids: number, n: number): void;
  /** `known`: leading blocks whose key is the hash stamped on their id (not hashed again). */
  mgr_insert(m: number, tokens: number, ids: number, nBlocks: number, parentId: number, parentPtr: number, known: number, staged: number): number;
  mgr_stamp_chain(m: number, tokens: number, ids: number, nBlocks: number, parentId: number, parentPtr: number): number;
  mgr_evict(m: number, k: number): number;
  mgr_evict_all(m: number): number;
  mgr_num_free(m: number): number;
  mgr_num_used(m: number): number;
  mgr_num_cached(m: number): number;
  mgr_ref(m: number, id: number): number;
  mgr_block_hash(m: number, id: number, out: number): number;
  /** Id 0's reference count (an i32 every mgr_refs_stride bytes). */
  mgr_refs_ptr(m: number): number;
  /** Bytes from one id's reference count to the next (META_SIZE with caching on, 4 without). */
  mgr_refs_stride(m: number): number;
  /** Id 0's recency stamp (a u32 every META_SIZE bytes; 0 without caching). */
  mgr_stamps_ptr(m: number): number;
  /** Per-id flag bytes (FLAG_CACHED, ...). */
  mgr_flags_ptr(m: number): number;
  /** The priority policy's per-id fields: id i at aux + i * AUX_SIZE; 0 under other policies. */
  mgr_aux_ptr(m: number): number;
  /** Per-id policy keys (u32 each); 0 under LRU. */
  mgr_keys_ptr(m: number): number;
  /** Test hook: moves the recency clock forward (to reach the u32 stamps' renumbering). */
  mgr_set_clock(m: number, v: number): void;
  mgr_free_ptr(m: number): number;
  mgr_error_index(): number;
  mgr_stats(m: number, out: number): void;
  mgr_check(m: number): number;
  /** Writes numBlocks, blockSize, prefixOn, seedLo, seedHi (i32 each) to `out`. */
  mgr_info(m: number, out: number): void;
  /** Event recording on (1) / off (0), 0 or -1 when memory ran out; recording calls may grow memory. */
  mgr_events_record(m: number, on: number, snapshots: number): number;
  /** Appends stored records rebuilding the announced cache (parents first); bytes appended or -1. */
  mgr_events_snapshot(m: number): number;
  /** Keeps the first `len` bytes of records. */
  mgr_events_rewind(m: number, len: number): void;
  /** Hashes of n stored records from p (rec bytes apart) as msgpack (uint64, or bin 16 when bytes is 1) at out; bytes written. */
  ev_wire_hashes(p: number, rec: number, n: number, bytes: number, out: number): number;
  /** Tokens of n stored records from p (rec bytes apart, ntok each) as msgpack integers at out; bytes written. */
  ev_wire_tokens(p: number, rec: number, n: number, ntok: number, out: number): number;
  /** Records from p (up to end) in one event: a chained run of stored records, or consecutive removals. */
  ev_wire_run(p: number, end: number): number;
  mgr_events_ptr(m: number): number;
  /** Bytes recorded, -1 when some records were lost (memory exhausted). */
  mgr_events_len(m: number): number;
  mgr_events_clear(m: number): void;
}
