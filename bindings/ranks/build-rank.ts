// Builds one rank from the pool's parsed options: its kind (one block table,
// composite tables, XTensor pages), the linear-state add-on it carries, the
// host tier around it, and the lock decorator when other threads share it.
// Every combination is data here; none is a branch in the pool.

import { BlockManagerImpl } from '../managers/block-manager-impl.js';
import { CompositeBlockManager, type CompositeBlockManagerOptions, type SubManagerFactory } from '../managers/composite-block-manager.js';
import { ConcurrentBlockManagerImpl } from '../managers/concurrent-block-manager-impl.js';
import type { EvictionPolicy } from '../managers/eviction-policy.js';
import { XTensorBlockManagerImpl, type XTensorBlockManagerOptions } from '../managers/xtensor-block-manager-impl.js';
import { ConcurrentXTensorBlockManagerImpl } from '../managers/xtensor-concurrent-block-manager-impl.js';
import { BlockTableRank } from './block-table-rank.js';
import { CompositeRank } from './composite-rank.js';
import { HostTierRank } from './host-tier-rank.js';
import { LinearStateAddOn, type LinearStateReuse } from './linear-state-add-on.js';
import { lockedRank, type Lockable } from './locked-rank.js';
import type { RankKind, RankManager } from './rank-manager.js';

/** Everything a rank is built from (the pool's options, parsed: pool/pool-options.ts). */
export interface RankConfig {
  kind: RankKind;
  numBlocks: number;
  blockSize: number;
  seed: number | bigint;
  seedHalves: { lo: number; hi: number };
  prefixCache: boolean;
  evictionPolicy: EvictionPolicy | undefined;
  composite: CompositeBlockManagerOptions | null;
  xtensor: Omit<XTensorBlockManagerOptions, 'dpRank'> | null;
  linearState: { numSlots: number; reuse: LinearStateReuse } | null;
  /** Other threads share the rank's managers: they live in shared memory and every call holds their locks. */
  concurrent: { lockTimeoutMs: number } | null;
  /** Host-tier blocks (padding included), or null for no host tier. */
  hostNumBlocks: number | null;
}

/** Builds rank `dpRank`; on a failure, disposes what it made and throws. */
export function buildRank(c: RankConfig, dpRank: number): RankManager {
  const made: { dispose(): void }[] = [];
  const shared: Lockable[] = [];
  const keep = <T extends { dispose(): void }>(x: T): T => (made.push(x), x);
  /** A core-backed KV manager, in shared memory (with its lock) when the rank is concurrent. */
  const manager = (numBlocks: number, prefixOn: boolean, minBlocks: 1 | 2 = 2): BlockManagerImpl => {
    const o = {
      numBlocks,
      blockSize: c.blockSize,
      enablePrefixCache: prefixOn,
      seed: c.seed,
      ...(prefixOn && c.evictionPolicy !== undefined && { evictionPolicy: c.evictionPolicy }),
    };
    if (c.concurrent === null) return keep(new BlockManagerImpl(o, { minBlocks }));
    const m = keep(new ConcurrentBlockManagerImpl({ ...o, lockTimeoutMs: c.concurrent.lockTimeoutMs }, { minBlocks }));
    shared.push(m);
    return m;
  };
  try {
    let rank: RankManager;
    if (c.kind === 'composite') {
      const makeSub: SubManagerFactory | undefined =
        c.concurrent === null
          ? undefined
          : (spec) => {
              const m = keep(new ConcurrentBlockManagerImpl(
                { numBlocks: spec.numBlocks, blockSize: spec.blockSize, enablePrefixCache: false, lockTimeoutMs: c.concurrent!.lockTimeoutMs },
                { minBlocks: 1 },
              ));
              shared.push(m);
              return m;
            };
      const composite = keep(new CompositeBlockManager(c.composite!, makeSub));
      const linear = c.linearState && keep(new LinearStateAddOn(c.linearState.numSlots, c.linearState.reuse, composite.capacityManager));
      rank = new CompositeRank(composite, linear, c.seedHalves);
    } else if (c.kind === 'xtensor') {
      const o = { ...c.xtensor!, dpRank };
      const kv = keep(c.concurrent === null ? new XTensorBlockManagerImpl(o) : new ConcurrentXTensorBlockManagerImpl({ ...o, lockTimeoutMs: c.concurrent.lockTimeoutMs }));
      if (kv instanceof ConcurrentXTensorBlockManagerImpl) shared.push(kv);
      kv.reservePaddingBlocks();
      const linear = c.linearState && keep(new LinearStateAddOn(c.linearState.numSlots, c.linearState.reuse, null));
      rank = new BlockTableRank('xtensor', kv, linear, c.seedHalves);
    } else {
      const kv = manager(c.numBlocks, c.prefixCache);
      const linear = c.linearState && keep(new LinearStateAddOn(c.linearState.numSlots, c.linearState.reuse, kv));
      const inner = new BlockTableRank('plain', kv, linear, c.seedHalves);
      rank = c.hostNumBlocks === null ? inner : new HostTierRank(inner, manager(c.hostNumBlocks, true), dpRank);
    }
    return c.concurrent === null ? rank : lockedRank(rank, shared);
  } catch (e) {
    for (const x of made.reverse()) x.dispose();
    throw e;
  }
}
