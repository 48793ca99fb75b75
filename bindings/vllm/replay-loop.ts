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

/** The replay stepped one engine step at a time (a caller that publishes events yields between steps). */
export class VllmReplayLoop {
  readonly engine: VllmEngine;
  private readonly n: number;
  private readonly next: number[];
  private readonly every: number;
  /** Requests made so far (they are made lazily, ahead of the engine). */
  created = 0;
  private reported = -1;
  private readonly t0 = performance.now();
  private done = false;

  constructor(
    private readonly trace: readonly TraceRequest[],
    limit: number | undefined,
    kvs: readonly VllmKvCache[],
    private readonly config: Readonly<VllmSchedulerConfig>,
    private readonly hooks: VllmLoopHooks = {},
  ) {
    this.n = Math.min(limit ?? trace.length, trace.length);
    this.engine = new VllmEngine(kvs, config);
    this.next = Array.from({ length: kvs.length }, (_, k) => k);
    this.every = Math.max(1, Math.floor(this.n / 200));
  }

  /** Requests the replay reads. */
  get total(): number {
    return this.n;
  }

  /** Runs one engine step (requests created first, lazily); false once no request is left. */
  step(): boolean {
    if (this.done) return false;
    const { engine, next, trace, n } = this;
    const dp = next.length;
    const W = this.config.maxNumSeqs;
    for (let k = 0; k < dp; k++) {
      const s = engine.schedulers[k]!;
      while (s.waiting.length <= W && next[k]! < n) {
        const r = next[k]!;
        s.add(new VllmRequest(r, trace[r]!));
        next[k] = r + dp;
        this.created++;
      }
    }
    if (!engine.hasWork) {
      this.done = true;
      return false;
    }
    engine.schedule(null);
    engine.complete();
    const { onStep, onProgress } = this.hooks;
    onStep?.(engine.last);
    if (onProgress && this.created !== this.reported && this.created % this.every === 0) {
      this.reported = this.created;
      onProgress(this.created, n);
    }
    return true;
  }

  /** The figures, once `step()` has returned false (the seconds: from the loop's start). */
  finish(): VllmReplayFigures {
    const seconds = (performance.now() - this.t0) / 1000;
    this.hooks.onProgress?.(this.n, this.n);
    return engineFigures(this.engine, this.n, seconds, this.hooks.idChecksum);
  }
}

export function runVllmReplay(
  trace: readonly TraceRequest[],
  limit: number | undefined,
  kvs: readonly VllmKvCache[],
  config: Readonly<VllmSchedulerConfig>,
  hooks: VllmLoopHooks = {},
): VllmReplayFigures {
  const loop = new VllmReplayLoop(trace, limit, kvs, config, hooks);
  while (loop.step());
  return loop.finish();
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
