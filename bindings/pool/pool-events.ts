// KV-cache events of a pool's ranks: switched on and off together, drained
// and snapshot rank by rank (each rank's device events, then its host
// tier's), decoded with the pool's salt names.

import type { CoreInstance } from '../core/core-instance.js';
import { decodeEvents, type KVEvent, type KVEventSource, type RecordEventsOptions, type SaltNames } from '../managers/kv-events.js';
import type { RankManager } from '../ranks/rank-manager.js';

/** Switches recording on every rank; a rank that cannot start (memory) switches the ones before it back off. */
export function recordOnRanks(ranks: readonly RankManager[], on: boolean, options?: RecordEventsOptions): void {
  ranks.forEach((k, i) => {
    try {
      k.recordEvents(on, options);
    } catch (e) {
      if (on) for (let j = 0; j < i; j++) ranks[j]!.recordEvents(false);
      throw e;
    }
  });
}

/** The recorded events of every rank, decoded, in order; forgets them. */
export function drainRanks(ranks: readonly RankManager[], salts: SaltNames): KVEvent[] {
  const out: KVEvent[] = [];
  ranks.forEach((k, r) => k.drainEventRecords((src, rt, ptr, len) => decodeEvents(rt.views(), ptr, len, r, src, salts, out)));
  return out;
}

/** Stored events announcing the cache of rank `only` (every rank when undefined) again. */
export function snapshotRanks(ranks: readonly RankManager[], salts: SaltNames, only: number | undefined): KVEvent[] {
  const out: KVEvent[] = [];
  ranks.forEach((k, r) => {
    if (only === undefined || only === r) k.snapshotEventRecords((src, rt, ptr, len) => decodeEvents(rt.views(), ptr, len, r, src, salts, out));
  });
  return out;
}

/** The raw records of every rank, tagged with the rank (the wire encoders read them in place). */
export function drainRankRecords(
  ranks: readonly RankManager[],
  visit: (dpRank: number, source: KVEventSource, rt: CoreInstance, ptr: number, len: number) => void,
): void {
  ranks.forEach((k, r) => k.drainEventRecords((src, rt, ptr, len) => visit(r, src, rt, ptr, len)));
}
