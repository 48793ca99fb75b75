// The raw exports of build/kvpool.wasm. Pointers and sizes are byte offsets
// into linear memory; ids and counts are i32; nothing here allocates except
// the functions marked "grows".

import type { HashExports } from './hash-exports.js';
import type { ManagerExports } from './manager-exports.js';
import type { LinearStateExports } from './linear-state-exports.js';
import type { TierExports } from './tier-exports.js';
import type { ReplayExports } from './replay-exports.js';
import type { VllmExports } from './vllm-exports.js';

export interface CoreExports extends HashExports, ManagerExports, LinearStateExports, TierExports, ReplayExports, VllmExports {
  readonly memory: WebAssembly.Memory;
  /** grows: a zeroed 16-byte aligned region, 0 when memory is exhausted or `bytes` is too large */
  alloc(bytes: number): number;
  release(ptr: number): void;
  heapTop(): number;
  /** Bytes in given-back regions below the top. */
  heapFreeBytes(): number;
  /** 1 when a region call of this instance gave up waiting for the region lock (then cleared; shared build). */
  heapLockStuck(): number;
  /** Byte offset of the allocator's state (lock word first). */
  heapState(): number;
  /** 0 when the core's header layout matches bindings/core/abi.ts. */
  abi_check(): number;
}
