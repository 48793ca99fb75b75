// Model of the rank seam (bindings/ranks/rank-manager.ts): everything a pool
// asks of one data-parallel rank. Each rank kind implements it (one block
// table: block-table-rank.ts; composite tables: composite-rank.ts), the host
// tier wraps a block-table rank (host-tier-rank.ts). The model has no
// concurrent ranks: a concurrent pool is compared with the model of the same
// configuration without concurrency.

import type { ModelBlockManager, ModelManagerStats } from '../block-manager-impl.js';
import type { ModelSequence } from '../sequence.js';
import type { ModelXTensor } from '../xtensor-block-manager-impl.js';
import type { ModelLinearStateAddOn } from './linear-state-add-on.js';

export type ModelRankKind = 'plain' | 'composite' | 'xtensor';

/** A pending beam-search block copy. */
export interface ModelSwap {
  src: number;
  dst: number;
}

export interface ModelRankManager {
  readonly kind: ModelRankKind;
  readonly blockSize: number;
  readonly prefixCache: boolean;
  /** The KV manager figures and raw blocks come from (a composite: its capacity sub-manager). */
  readonly kv: ModelBlockManager | ModelXTensor;
  readonly linear: ModelLinearStateAddOn | null;
  /** Beam-search copies made by swaps and not taken yet. */
  readonly transfers: ModelSwap[];

  /** Throws, changing nothing, when growing `s` to `numTokens` would be refused. */
  precheck(s: ModelSequence, numTokens: number, maxCopyBlocks: number): void;
  /** Grows `s` to `numTokens`, all or nothing; an empty sequence first takes its prefix hits. */
  allocate(s: ModelSequence, numTokens: number, maxCopyBlocks: number): boolean;
  /** Matches more of the prompt of a purely shared sequence, then allocates the rest; kvCached = numTokens. */
  tryAllocate(s: ModelSequence): boolean;
  /** Attaches the prefix hits of a sequence that holds no blocks. */
  allocateShared(s: ModelSequence): void;
  /** Caches the full blocks of tokens [0, numTokens) after the shared prefix. */
  cache(s: ModelSequence, numTokens: number): void;
  /** Lets go of everything `s` holds, caching its computed blocks first when asked. */
  release(s: ModelSequence, cacheFirst: boolean): void;
  /** `child` (a copy of `parent`) takes a reference on each of their blocks. */
  fork(parent: ModelSequence, child: ModelSequence): void;
  /** Beam search: `child` takes `source`'s blocks now; its next allocation drops its own and continues on them. */
  adoptBeam(child: ModelSequence, source: ModelSequence, swap: boolean): void;
  holds(s: ModelSequence): boolean;
  /** Chain keys at the first `n` block boundaries of `s`. */
  prefixKeys(s: ModelSequence, n: number): string[];

  numFreeBlocks(): number;
  numUsedBlocks(): number;
  numBlocksInPrefixCache(): number;
  kvCacheUtilization(): number;
  stats(): ModelManagerStats;
  recordEvents(on: boolean): void;
  resetPrefixCache(): number;
  time(): number;
  setTime(t: number): void;
  /** Turns on the peak figures of every manager of the rank (a scan per step). */
  trackPeaks(): void;
}
