// Per-block state codes for views of a manager (the pool inspector's grid):
// one byte per id, read from the core's records in one pass.

export const BlockState = {
  /** On the free stack. */
  Free: 0,
  /** One holder other than the prefix cache (it may be cached too). */
  Held: 1,
  /** Several holders other than the prefix cache (shared prefix, forks). */
  Shared: 2,
  /** Only the prefix cache holds it: eviction may take it. */
  Cached: 3,
  /** Id 0, never handed out. */
  Padding: 4,
} as const;
export type BlockState = (typeof BlockState)[keyof typeof BlockState];

/** Display names, indexed by code. */
export const BLOCK_STATE_NAMES = ['free', 'held', 'shared', 'cached', 'padding'] as const;
