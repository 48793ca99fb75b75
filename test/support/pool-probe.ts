// The pool internals the differential tests compare with the model: each
// rank's free stack and eviction order, its single-id free stack, and the
// rank's KV manager itself (to evict, as device pressure would). Everything
// else they compare goes through the public API. These reads sit here, in one
// place, so that a change of the pool's internals (one rank-manager seam)
// changes this file and no test.

import type { BlockManagerPool } from '../../bindings/index.js';

interface RankInternals {
  managers: Array<{ freeIds(): Int32Array; lruOrder(): Int32Array; evict(n: number): number; check(): void }>;
  singles: Array<{ freeIds(): Int32Array }>;
  hosts?: Array<{ freeIds(): Int32Array; lruOrder(): Int32Array }>;
}

const inner = (pool: BlockManagerPool) => pool as unknown as RankInternals;

/** Rank `r`'s KV free stack, bottom first (the last id is handed out next). */
export function rankFreeIds(pool: BlockManagerPool, r: number): number[] {
  return Array.from(inner(pool).managers[r]!.freeIds());
}

/** Rank `r`'s cached KV ids in eviction order (first evicted first). */
export function rankEvictionOrder(pool: BlockManagerPool, r: number): number[] {
  return Array.from(inner(pool).managers[r]!.lruOrder());
}

/** Rank `r`'s single-id free stack, bottom first. */
export function rankSingleFreeIds(pool: BlockManagerPool, r: number): number[] {
  return Array.from(inner(pool).singles[r]!.freeIds());
}

/** Evicts up to `n` unheld cached blocks of rank `r` (device pressure); returns how many. */
export function rankEvict(pool: BlockManagerPool, r: number, n: number): number {
  return inner(pool).managers[r]!.evict(n);
}

/** The host tier's free stack and eviction order of rank `r` (HierarchyBlockManagerPool). */
export function hostRankState(pool: BlockManagerPool, r: number): { free: number[]; evictionOrder: number[] } {
  const h = inner(pool).hosts![r]!;
  return { free: Array.from(h.freeIds()), evictionOrder: Array.from(h.lruOrder()) };
}
