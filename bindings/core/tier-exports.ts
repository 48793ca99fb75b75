// Raw exports of the core for the host tier (assembly/tier-exports.ts).

export interface TierExports {
  /**
   * Caches ids[i] under the 16 bytes at hashes + 16*i; new entries or a
   * negative code. While recording events: each block's tokens at `tokens`,
   * its parent (kind i32, 16 bytes) at `parents` + 20*i (else both 0).
   */
  mgr_insert_hashes(m: number, ids: number, hashes: number, n: number, tokens: number, parents: number): number;
  /** Prefix hits a match of nBlocks full blocks from block 0 would find; changes nothing. */
  mgr_peek(m: number, tokens: number, nBlocks: number, salt: number): number;
  /** 1 when the id is a prefix-cache entry. */
  mgr_is_cached(m: number, id: number): number;
  /** The offload choice: moved pairs and their hashes out, kept pairs compacted in place; returns the number moved. */
  mgr_offload_pick(m: number, devIds: number, hostIds: number, n: number, movedDev: number, movedHost: number, hashes: number): number;
  /**
   * A load plan's hashes: each source id's stamped hash to out + 16i and onto
   * the destination id (unless cached); leading destination ids stamped, or a
   * negative code when an id is out of range or a destination not held.
   */
  mgr_stamp_loaded(dst: number, src: number, srcIds: number, dstIds: number, n: number, out: number): number;
  /**
   * A finished sequence's release with its offload completed at once (both
   * managers, no events): blocks offloaded, or a negative code.
   */
  tier_release_offload(
    dev: number, host: number, devIds: number, nDev: number, hostIds: number, heldHost: number, cachedHost: number, cachedDev: number, q: number,
  ): number;
}
