// Raw linear-state cache exports of the core (assembly/linear-state-exports.ts).
// Hashes are 16-byte keys in linear memory; slots are ids; errors negative.

export interface LinearStateExports {
  /** grows: header pointer of a cache of `numSlots` slots (slot 0 padding), 0 when memory is exhausted */
  ls_create(numSlots: number): number;
  /** a free slot marked live (evicting at most one unpinned checkpoint), 0 when none */
  ls_acquire_live(m: number): number;
  ls_release_live(m: number, slot: number): number;
  ls_abort(m: number, slot: number): number;
  /** pins and touches the committed slot of `key`; 0 on a miss */
  ls_match(m: number, key: number): number;
  ls_unpin(m: number, slot: number): number;
  /** the committed slot of `key` or 0; no LRU change */
  ls_contains(m: number, key: number): number;
  /** new pending slot (> 0), existing committed slot negated (< 0, touched, pinned when asked), 0 when none */
  ls_reserve(m: number, key: number, pinExisting: number): number;
  /** pending -> committed; returns the committed slot (an existing entry wins) */
  ls_commit(m: number, slot: number): number;
  /** live -> committed under `key`; returns the committed slot */
  ls_promote(m: number, slot: number, key: number): number;
  /** 0 free, 1 live, 2 pending, 3 committed */
  ls_state(m: number, slot: number): number;
  ls_trim(ls: number, kv: number, ids: number, from: number, limit: number, contiguous: number): number;
  /** manager audit then slot-state audit; writes live, pending, pinned, pins (i32) at counts */
  ls_check(m: number, counts: number): number;
  /** chain hashes at the first nBlocks boundaries (stamps where held blocks carry them; block 0 chained on the salt's digest at `salt` unless 0); tokens staged from block tokFrom; -1 when a block before it lacks its stamp */
  ls_prefix_hashes(kv: number, ids: number, nHeld: number, tokens: number, nBlocks: number, out: number, tokFrom: number, salt: number): number;
  /** a prefill's restore and saves resolved and committed at once; per-save slots, then the restored slot, at scratch; returns the checkpoints committed */
  ls_prefill_batch(m: number, restoreKey: number, keys: number, n: number, scratch: number, setMask: number): number;
}
