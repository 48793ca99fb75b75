// A vLLM engine: one scheduler and one block pool per data-parallel rank,
// stepping in lockstep (docs/engines.md, data parallelism). A new request
// goes to the rank with the smallest 4 x waiting + running, the lowest rank
// on ties: the score vLLM's DP load balancer gives each engine core.

import { clearStepBatch, type StepBatch } from '../timing/timing-model.js';
import { checkInt, describe } from '../validate.js';
import type { VllmKvCache } from './kv-cache.js';
import { vllmMetricsText } from './metrics.js';
import type { VllmRequest } from './request.js';
import { checkVllmKvCache, checkVllmSchedulerConfig, VllmScheduler, type VllmSchedulerConfig } from './scheduler.js';

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
  /** The last batch found to be one (schedule() checks a batch it has not seen). */
  private checkedBatch: StepBatch | null = null;

  /**
   * One rank per KV cache of `kvs` (each its own), every rank's scheduler
   * configured by `config`; both checked first (checkVllmSchedulerConfig).
   */
  constructor(kvs: readonly VllmKvCache[], config: Readonly<VllmSchedulerConfig>) {
    if (!Array.isArray(kvs) || kvs.length === 0) throw new TypeError(`kvs must be a non-empty array of KV caches, one per dp rank, got ${describe(kvs)}`);
    kvs.forEach((kv, k) => {
      checkVllmKvCache(`kvs[${k}]`, kv);
      const first = kvs.indexOf(kv);
      if (first !== k) throw new RangeError(`kvs[${k}] is kvs[${first}]: each dp rank needs its own KV cache`);
    });
    const checked = checkVllmSchedulerConfig('config', config);
    this.schedulers = kvs.map((kv, rank) => new VllmScheduler(kv, checked, rank));
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
    checkInt('rank', rank, 0, this.schedulers.length - 1);
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
    if (batch !== null && batch !== this.checkedBatch) {
      checkStepBatch(batch);
      this.checkedBatch = batch;
    }
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

const BATCH_LISTS = ['chunkTokens', 'chunkContextTokens', 'chunkRanks', 'decodeContexts', 'decodeRanks'] as const;

/** Throws (naming `batch`) unless it is a StepBatch the scheduler can fill (emptyStepBatch() makes one). */
function checkStepBatch(batch: unknown): void {
  if (batch === null || typeof batch !== 'object') throw new TypeError(`batch must be a StepBatch (emptyStepBatch()) or null, got ${describe(batch)}`);
  const b = batch as Record<string, unknown>;
  for (const k of BATCH_LISTS) if (!Array.isArray(b[k])) throw new TypeError(`batch must be a StepBatch (emptyStepBatch()) or null: its ${k} is ${describe(b[k])}, not an array`);
}
