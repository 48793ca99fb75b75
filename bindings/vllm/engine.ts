// A vLLM engine: one scheduler and one block pool per data-parallel rank,
// stepping in lockstep (docs/engines.md, data parallelism). A new request
// goes to the rank with the smallest 4 x waiting + running, the lowest rank
// on ties: the score vLLM's DP load balancer gives each engine core.

import { clearStepBatch, type StepBatch } from '../timing/timing-model.js';
import type { VllmKvCache } from './kv-cache.js';
import { vllmMetricsText } from './metrics.js';
import type { VllmRequest } from './request.js';
import { VllmScheduler, type VllmSchedulerConfig } from './scheduler.js';

/** One step of the engine, every rank summed: the harness's per-step record (docs/engines.md, per-step records). */
export interface VllmStepRecord {
  /** 1 for the first step. */
  step: number;
  scheduledTokens: number;
  scheduledRequests: number;
  /** Requests admitted (first admissions and preempted ones resumed). */
  admitted: number;
  preempted: number;
  finished: number;
  /** Free-queue length after the step (never-used and cached-free blocks). */
  freeBlocks: number;
}

/** The harness's line for a step: `step scheduled_tokens scheduled_reqs admitted preempted finished free_queue_len`. */
export function stepLine(s: Readonly<VllmStepRecord>): string {
  return `${s.step} ${s.scheduledTokens} ${s.scheduledRequests} ${s.admitted} ${s.preempted} ${s.finished} ${s.freeBlocks}\n`;
}

export class VllmEngine {
  readonly schedulers: VllmScheduler[];
  /** Steps scheduled so far. */
  steps = 0;
  /** The last completed step (valid after `complete`). */
  readonly last: VllmStepRecord = { step: 0, scheduledTokens: 0, scheduledRequests: 0, admitted: 0, preempted: 0, finished: 0, freeBlocks: 0 };
  private pending = false;

  constructor(kvs: readonly VllmKvCache[], config: Readonly<VllmSchedulerConfig>) {
    this.schedulers = kvs.map((kv, rank) => new VllmScheduler(kv, config, rank));
  }

  get dpSize(): number {
    return this.schedulers.length;
  }

  /** The rank vLLM's load balancer picks now: the smallest 4 x waiting + running, the lowest on ties. */
  chooseRank(): number {
    let best = 0;
    let bestScore = Infinity;
    for (let k = 0; k < this.schedulers.length; k++) {
      const s = this.schedulers[k]!;
      const score = 4 * s.waiting.length + s.running.length;
      if (score < bestScore) {
        bestScore = score;
        best = k;
      }
    }
    return best;
  }

  /** Queues a request on the rank chooseRank() picks; returns that rank. */
  add(req: VllmRequest): number {
    const k = this.chooseRank();
    this.schedulers[k]!.add(req);
    return k;
  }

  /** Queues a request on rank `rank` (a caller that already knows what the balancer picks). */
  addTo(rank: number, req: VllmRequest): void {
    this.schedulers[rank]!.add(req);
  }

  get hasWork(): boolean {
    for (const s of this.schedulers) if (s.hasWork) return true;
    return false;
  }

  /** Requests queued (every rank). */
  get waiting(): number {
    let n = 0;
    for (const s of this.schedulers) n += s.waiting.length;
    return n;
  }

  get running(): number {
    let n = 0;
    for (const s of this.schedulers) n += s.running.length;
    return n;
  }

  /**
   * Every rank's metrics in the Prometheus text format, under vLLM's names
   * where they mean the same (docs/metrics.md, the vLLM engine), one series
   * per rank labelled `engine`, after your constant `labels` (e.g. `{ model_name }`).
   */
  metricsText(labels: Record<string, string> = {}): string {
    return vllmMetricsText(this, labels);
  }

  /** Schedules a step on every rank; `batch`, when given, is cleared and filled (ranks in order). */
  schedule(batch: StepBatch | null): void {
    if (this.pending) throw new Error('kvpool: the vLLM engine scheduled a step that is not complete yet; complete() it first');
    if (batch !== null) {
      clearStepBatch(batch);
      batch.dpRanks = this.schedulers.length;
    }
    for (const s of this.schedulers) s.schedule(batch);
    this.steps++;
    this.pending = true;
  }

  /** Completes the step scheduled last on every rank and records it in `last`. */
  complete(): void {
    if (!this.pending) throw new Error('kvpool: the vLLM engine has no step to complete; schedule() one first');
    const r = this.last;
    r.step = this.steps;
    r.scheduledTokens = r.scheduledRequests = r.admitted = r.preempted = r.finished = r.freeBlocks = 0;
    for (const s of this.schedulers) {
      r.scheduledTokens += s.stepTokens;
      r.scheduledRequests += s.scheduled.length;
      r.admitted += s.stepAdmitted;
      r.preempted += s.stepPreempted;
      s.complete();
      r.finished += s.finished.length;
      r.freeBlocks += s.kv.numFreeBlocks();
    }
    this.pending = false;
  }
}
