// The vLLM engine's replay (docs/engines.md, replaying a trace): every
// request arrives at time 0 and the engine steps until none is left. As the
// vLLM harness does, requests are created lazily: each rank keeps more of
// them queued than one step can look at (it admits at most maxNumSeqs),
// which is the same as queueing them all at once. With all arriving at once
// the load balancer's 4 x waiting + running sends request r to rank
// r mod dpSize, so each rank takes its own share in order.

import type { ReplayProgress } from '../replay/kernel.js';
import type { TraceRequest } from '../replay/trace.js';
import { VllmEngine, type VllmStepRecord } from './engine.js';
import type { VllmKvCache, VllmKvFigures } from './kv-cache.js';
import { VllmRequest } from './request.js';
import type { VllmRankCounts, VllmSchedulerConfig } from './scheduler.js';

/** One rank's figures at the end of a replay. */
export interface VllmRankFigures extends VllmRankCounts, VllmKvFigures {
  dpRank: number;
}

/** The loop's figures, every rank summed (the checksum over every rank's ids in the order they were popped). */
export interface VllmReplayFigures extends VllmRankCounts, VllmKvFigures {
  requests: number;
  steps: number;
  ranks: VllmRankFigures[];
  seconds: number;
}

export interface VllmLoopHooks {
  onStep?: (s: Readonly<VllmStepRecord>) => void;
  onProgress?: ReplayProgress;
  /** The id checksum over every rank (dp > 1: the pools' own checksums cannot be combined); default: rank 0's. */
  idChecksum?: () => number;
}

export function runVllmReplay(
  trace: readonly TraceRequest[],
  limit: number | undefined,
  kvs: readonly VllmKvCache[],
  config: Readonly<VllmSchedulerConfig>,
  hooks: VllmLoopHooks = {},
): VllmReplayFigures {
  const n = Math.min(limit ?? trace.length, trace.length);
  const engine = new VllmEngine(kvs, config);
  const dp = kvs.length;
  const next = Array.from({ length: dp }, (_, k) => k);
  const W = config.maxNumSeqs;
  const { onStep, onProgress } = hooks;
  const every = Math.max(1, Math.floor(n / 200));
  let created = 0;
  let reported = -1;
  const t0 = performance.now();
  for (;;) {
    for (let k = 0; k < dp; k++) {
      const s = engine.schedulers[k]!;
      while (s.waiting.length <= W && next[k]! < n) {
        const r = next[k]!;
        s.add(new VllmRequest(r, trace[r]!));
        next[k] = r + dp;
        created++;
      }
    }
    if (!engine.hasWork) break;
    engine.schedule(null);
    engine.complete();
    onStep?.(engine.last);
    if (onProgress && created !== reported && created % every === 0) {
      reported = created;
      onProgress(created, n);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  onProgress?.(n, n);
  return engineFigures(engine, n, seconds, hooks.idChecksum);
}

/**
 * An engine's figures, every rank summed (the checksum over every rank's
 * ids in the order they were popped: `idChecksum`, when its ranks share
 * one; else rank 0's). `requests`: the requests it was given.
 */
export function engineFigures(engine: VllmEngine, requests: number, seconds: number, idChecksum?: () => number): VllmReplayFigures {
  const ranks = engine.schedulers.map((s, dpRank): VllmRankFigures => ({ dpRank, ...s.counts, ...s.kv.figures() }));
  const sum = (k: keyof VllmRankCounts | Exclude<keyof VllmKvFigures, 'idChecksum'>) => ranks.reduce((a, f) => a + f[k], 0);
  return {
    requests,
    admitted: sum('admitted'),
    resumedPrefills: sum('resumedPrefills'),
    preemptions: sum('preemptions'),
    finished: sum('finished'),
    rejected: sum('rejected'),
    truncated: sum('truncated'),
    promptBlocks: sum('promptBlocks'),
    matchedBlocks: sum('matchedBlocks'),
    scheduledTokens: sum('scheduledTokens'),
    busySteps: sum('busySteps'),
    evictedBlocks: sum('evictedBlocks'),
    allocatedBlocks: sum('allocatedBlocks'),
    idChecksum: idChecksum ? idChecksum() : ranks[0]!.idChecksum,
    freeBlocksAtEnd: sum('freeBlocksAtEnd'),
    cachedBlocksAtEnd: sum('cachedBlocksAtEnd'),
    cachedKeysAtEnd: sum('cachedKeysAtEnd'),
    allocateCalls: sum('allocateCalls'),
    steps: engine.steps,
    ranks,
    seconds,
  };
}
