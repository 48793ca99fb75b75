// Model of building one rank from the parsed options
// (bindings/ranks/build-rank.ts): its kind, the linear-state add-on it
// carries, and the host tier around it. Every combination is data here.

import { ModelBlockManager } from '../block-manager-impl.js';
import { ModelCompositeBlockManager, type ModelCompositeOptions } from '../composite-block-manager.js';
import type { ModelEvictionPolicy } from '../prefix-cache.js';
import { ModelXTensor, type ModelXTensorOptions } from '../xtensor-block-manager-impl.js';
import { ModelBlockTableRank } from './block-table-rank.js';
import { ModelCompositeRank } from './composite-rank.js';
import { ModelHostTierRank } from './host-tier-rank.js';
import { ModelLinearStateAddOn, type ModelLinearStateReuse } from './linear-state-add-on.js';
import type { ModelRankKind, ModelRankManager } from './rank-manager.js';

/** Everything a rank is built from (model/pool-options.ts parses it). */
export interface ModelRankConfig {
  kind: ModelRankKind;
  numBlocks: number;
  blockSize: number;
  prefixCache: boolean;
  evictionPolicy: ModelEvictionPolicy;
  composite: ModelCompositeOptions | null;
  xtensor: ModelXTensorOptions | null;
  linearState: { numSlots: number; reuse: ModelLinearStateReuse } | null;
  /** Host-tier blocks (padding included), or null for none. */
  hostNumBlocks: number | null;
}

/** A block manager of the rank; the pool's sequences check their tokens already. */
function manager(c: ModelRankConfig, numBlocks: number, prefixOn: boolean): ModelBlockManager {
  const m = new ModelBlockManager({ numBlocks, blockSize: c.blockSize, enablePrefixCache: prefixOn, evictionPolicy: prefixOn ? c.evictionPolicy : 'lru' });
  m.checkTokens = false;
  return m;
}

export function modelBuildRank(c: ModelRankConfig, dpRank: number): ModelRankManager {
  const linear = c.linearState && new ModelLinearStateAddOn(c.linearState.numSlots, c.linearState.reuse);
  if (c.kind === 'composite') return new ModelCompositeRank(new ModelCompositeBlockManager(c.composite!), linear);
  if (c.kind === 'xtensor') {
    const kv = new ModelXTensor(c.xtensor!);
    kv.reservePaddingBlocks();
    return new ModelBlockTableRank('xtensor', kv, c.blockSize, linear);
  }
  const inner = new ModelBlockTableRank('plain', manager(c, c.numBlocks, c.prefixCache), c.blockSize, linear);
  return c.hostNumBlocks === null ? inner : new ModelHostTierRank(inner, manager(c, c.hostNumBlocks, true), dpRank);
}
