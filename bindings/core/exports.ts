// The raw exports of build/kvpool.wasm. Pointers and sizes are byte offsets
// into linear memory; ids and counts are i32; nothing here allocates except
// the functions marked "grows".

import type { HashExports } from './hash-exports.js';
import type { ManagerExports } from './manager-exports.js';
import type { LinearStateExports } from './linear-state-exports.js';
import type { TierExports } from './tier-exports.js';
import type { ReplayExports } from './replay-exports.js';

export interface CoreExports extends HashExports, ManagerExports, LinearStateExports, TierExports, ReplayExports {
  readonly memory: WebAssembly.Memory;
  /** grows: a zeroed 16-byte aligned region, 0 when memory is exhausted */
  alloc(bytes: number): number;
  release(ptr: number): void;
  heapTop(): number;
}
