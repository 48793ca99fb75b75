// vLLM v1's Scheduler for one dp rank (docs/engines.md, the vLLM engine):
// FCFS, no speculative decoding, KV connectors, LoRA or async scheduling.
// A step is scheduled (`schedule`) and later completed (`complete`), so that
// a clock may run between the two; requests are added between steps.
//
// schedule():
// 1. Running requests first, in order, while the token budget lasts: each
//    gets the tokens it lacks (one for a decode; a prefill the rest of its
//    prompt, cut to long_prefill_token_threshold and to the budget). When
//    the pool cannot give them blocks, the newest running request is
//    preempted (its blocks freed, its KV to be computed again, back to the
//    front of the queue) and the allocation retried; a request that has to
//    preempt itself ends this phase.
// 2. Only if nothing was preempted, waiting requests from the front while
//    a sequence slot and budget remain: the prefix cache's hit (a preempted
//    request looks up its outputs too), then blocks for the rest (cut as
//    above), with the whole request reserved first when reserveFullIsl is
//    on. The first that does not fit stops admission.
// 3. Every scheduled request's computed count advances by its tokens (done as
//    each is scheduled: nothing reads it in between).
// A step that schedules nothing and preempts nothing has an empty pool and
// a queue head that cannot fit even alone: that request is dropped
// (rejected, or truncated if it had given tokens), as vLLM's harness does.
// So is a request that preempts itself, alone, for the second time without
// having got further: vLLM would loop on it forever. So the run ends.
//
// complete(): each scheduled request that is no longer prefilling gives an
// output token; one that gave its last is finished and its blocks freed,
// in the order the step scheduled them.

import { addChunk, addDecode, type StepBatch } from '../timing/timing-model.js';
import type { VllmKvCache } from './kv-cache.js';
import { RequestQueue } from './request-queue.js';
import { checkBool, checkInt, checkObject, describe } from '../validate.js';
import { DROPPED, FINISHED, PREEMPTED, RUNNING, VllmRequest, WAITING } from './request.js';

export interface VllmSchedulerConfig {
  /** Requests running at once (vLLM's max_num_seqs). */
  maxNumSeqs: number;
  /** Tokens scheduled per step (vLLM's max_num_batched_tokens). */
  maxNumBatchedTokens: number;
  /** A prefill's tokens per step at most (0: no cap; vLLM's long_prefill_token_threshold). */
  longPrefillTokenThreshold: number;
  /** Admit a request only if all of its tokens' blocks fit (vLLM's scheduler_reserve_full_isl). */
  reserveFullIsl: boolean;
}

/**
 * Throws (naming `name.field` and the value) unless `config` is a scheduler
 * configuration: at least one sequence and one token a step, a threshold
 * of 0 (no cap) or more, a boolean reserveFullIsl. Returns a copy of it.
 */
export function checkVllmSchedulerConfig(name: string, config: unknown): VllmSchedulerConfig {
  checkObject(name, config);
  const c = config as Record<string, unknown>;
  return {
    maxNumSeqs: checkInt(`${name}.maxNumSeqs`, c['maxNumSeqs'], 1),
    maxNumBatchedTokens: checkInt(`${name}.maxNumBatchedTokens`, c['maxNumBatchedTokens'], 1),
    longPrefillTokenThreshold: checkInt(`${name}.longPrefillTokenThreshold`, c['longPrefillTokenThreshold'], 0),
    reserveFullIsl: checkBool(`${name}.reserveFullIsl`, c['reserveFullIsl']),
  };
}

const KV_METHODS = ['numFreeBlocks', 'computedBlocks', 'allocateSlots', 'free', 'release', 'figures'] as const;

/** Throws (naming `name`) unless `kv` has what the scheduler calls on a KV cache. */
export function checkVllmKvCache(name: string, kv: unknown): VllmKvCache {
  if (kv === null || typeof kv !== 'object') throw new TypeError(`${name} must be a VllmKvCache (a VllmKvCacheManager), got ${describe(kv)}`);
  const k = kv as Record<string, unknown>;
  for (const m of KV_METHODS) if (typeof k[m] !== 'function') throw new TypeError(`${name} must be a VllmKvCache (a VllmKvCacheManager): its ${m} is ${describe(k[m])}, not a method`);
  checkInt(`${name}.blockSize`, k['blockSize'], 1);
  return kv as VllmKvCache;
}

/** What one rank's scheduler counted over its run. */
export interface VllmRankCounts {
  /** Requests admitted for the first time. */
  admitted: number;
  /** Preempted requests admitted again (their KV computed again). */
  resumedPrefills: number;
  preemptions: number;
  finished: number;
  rejected: number;
  truncated: number;
  /** floor(promptLength / blockSize) of each request at its first admission. */
  promptBlocks: number;
  /** Prefix-cache hit blocks at first admissions. */
  matchedBlocks: number;
  scheduledTokens: number;
  /** Steps this rank scheduled something in, or dropped a request in. */
  busySteps: number;
}

/**
 * Shortens a list to `n` in place, keeping its storage: setting `length`
 * is a call into the runtime that drops it, and the next push allocates
 * again (a timed fleet makes millions of steps: ~4 % of its time, and
 * garbage).
 */
function truncate<T>(a: T[], n: number): void {
  while (a.length > n) a.pop();
}

export class VllmScheduler {
  readonly running: VllmRequest[] = [];
  readonly waiting = new RequestQueue();
  /** The requests the last step scheduled, in vLLM's order (running ones, then admitted ones). */
  readonly scheduled: VllmRequest[] = [];
  /** Requests the last completed step finished, in that order. */
  readonly finished: VllmRequest[] = [];
  /** The request the last step dropped (could never fit), or null. */
  dropped: VllmRequest | null = null;
  /** The last step's figures. */
  stepTokens = 0;
  stepAdmitted = 0;
  stepPreempted = 0;
  readonly counts: VllmRankCounts = {
    admitted: 0, resumedPrefills: 0, preemptions: 0, finished: 0, rejected: 0, truncated: 0, promptBlocks: 0, matchedBlocks: 0, scheduledTokens: 0, busySteps: 0,
  };
  private readonly B: number;
  readonly kv: VllmKvCache;
  /** The configuration, as checked (a copy of the one given). */
  readonly config: Readonly<VllmSchedulerConfig>;
  readonly rank: number;

  /** Checks its arguments first: a KV cache, a configuration (checkVllmSchedulerConfig), a rank >= 0. */
  constructor(kv: VllmKvCache, config: Readonly<VllmSchedulerConfig>, rank = 0) {
    this.kv = checkVllmKvCache('kv', kv);
    this.config = Object.freeze(checkVllmSchedulerConfig('config', config));
    this.rank = checkInt('rank', rank, 0);
    this.B = kv.blockSize;
  }

  /** Queues a request (at the back); a request is queued once in its life. */
  add(req: VllmRequest): void {
    if (!(req instanceof VllmRequest)) throw new TypeError(`req must be a VllmRequest, got ${describe(req)}`);
    if (req.queued || req.status !== WAITING || req.numComputed !== 0 || req.numOutputs !== 0) {
      throw new RangeError(`request ${req.index} was queued before (status ${req.status}); add a fresh request`);
    }
    req.queued = true;
    req.rank = this.rank;
    this.waiting.push(req);
  }

  /** True while a request is queued or running. */
  get hasWork(): boolean {
    return this.running.length > 0 || this.waiting.length > 0;
  }

  /** Schedules one step (see the file's comment); `batch`, when given, gets every chunk and decode. */
  schedule(batch: StepBatch | null): void {
    const { maxNumBatchedTokens, maxNumSeqs, longPrefillTokenThreshold: thr, reserveFullIsl } = this.config;
    const kv = this.kv;
    const running = this.running;
    const scheduled = this.scheduled;
    truncate(scheduled, 0);
    this.dropped = null;
    let budget = maxNumBatchedTokens;
    let preempted = 0;
    let admitted = 0;
    // A request that had to preempt itself again without getting further (see futile()) was dropped.
    let stalled = false;

    for (let i = 0; i < running.length && budget > 0; ) {
      const req = running[i]!;
      let n = req.numTokens - req.numComputed;
      if (thr > 0 && n > thr) n = thr;
      if (n > budget) n = budget;
      let ok = kv.allocateSlots(req, n, 0, false);
      while (!ok) {
        const victim = running.pop()!;
        if (victim === req && this.futile(req)) {
          this.drop(req);
          this.counts.busySteps--; // counted once, below, with the step
          stalled = true;
          break;
        }
        this.preempt(victim);
        preempted++;
        if (victim === req) break;
        ok = kv.allocateSlots(req, n, 0, false);
      }
      if (!ok) break;
      if (batch !== null) {
        if (req.numOutputs > 0 && req.numComputed === req.numTokens - 1) addDecode(batch, req.numTokens, this.rank);
        else addChunk(batch, n, req.numComputed, this.rank);
      }
      // vLLM advances the computed count after the whole step is scheduled; nothing in between reads
      // it (a preempted request is always one not scheduled yet: the newest, behind this one).
      req.numComputed += n;
      req.scheduled = n;
      scheduled.push(req);
      budget -= n;
      i++;
    }

    if (preempted === 0 && !stalled) {
      const waiting = this.waiting;
      while (waiting.length > 0 && budget > 0 && running.length < maxNumSeqs) {
        const req = waiting.peek()!;
        // A waiting request never holds KV (a preempted one gave it back), so it always looks up.
        const hit = kv.computedBlocks(req);
        const computed = hit * this.B;
        let n = req.numTokens - computed;
        if (thr > 0 && n > thr) n = thr;
        if (n > budget) n = budget;
        if (!kv.allocateSlots(req, n, hit, reserveFullIsl)) break;
        waiting.shift();
        running.push(req);
        if (req.status === WAITING) {
          this.counts.admitted++;
          this.counts.promptBlocks += Math.floor(req.promptLength / this.B);
          this.counts.matchedBlocks += hit;
        } else {
          this.counts.resumedPrefills++;
        }
        admitted++;
        req.status = RUNNING;
        req.numComputed = computed + n;
        if (batch !== null) {
          addChunk(batch, n, computed, this.rank);
          batch.cachedTokens += computed;
        }
        req.scheduled = n;
        scheduled.push(req);
        budget -= n;
      }
    }

    const tokens = this.config.maxNumBatchedTokens - budget;
    this.stepTokens = tokens;
    this.stepAdmitted = admitted;
    this.stepPreempted = preempted;
    this.counts.preemptions += preempted;
    this.counts.scheduledTokens += tokens;
    if (tokens > 0 || preempted > 0 || stalled) this.counts.busySteps++;
    else if (this.waiting.length > 0) this.drop(this.waiting.shift()!);
  }

  /** Ends the step scheduled last: outputs given, finished requests freed (see the file's comment). */
  complete(): void {
    const finished = this.finished;
    truncate(finished, 0);
    const scheduled = this.scheduled;
    for (let i = 0; i < scheduled.length; i++) {
      const req = scheduled[i]!;
      req.scheduled = 0;
      if (req.numComputed < req.numTokens) continue; // a prefill chunk: nothing sampled
      req.numOutputs++;
      if (req.numOutputs >= req.maxOutputs) {
        req.status = FINISHED;
        this.kv.release(req);
        finished.push(req);
      }
    }
    if (finished.length > 0) {
      const running = this.running;
      let w = 0;
      for (let i = 0; i < running.length; i++) {
        const r = running[i]!;
        if (r.status === RUNNING) running[w++] = r;
      }
      truncate(running, w);
      this.counts.finished += finished.length;
    }
    truncate(scheduled, 0);
  }

  private preempt(req: VllmRequest): void {
    if (this.running.length === 0) {
      // It preempts itself, every other request gone: it needs more blocks than the pool has.
      req.selfPreemptedAt = req.numComputed;
    }
    this.kv.free(req);
    req.status = PREEMPTED;
    req.numComputed = 0;
    req.numPreemptions++;
    this.waiting.pushFront(req);
  }

  /**
   * True when `req`, about to preempt itself with nothing else running, did
   * so before and has not got further since. Such a request holds more
   * tokens than the pool has blocks for (it could never be scheduled whole
   * again, nor give another token); vLLM (and its harness) would admit it
   * again, compute the same chunks and preempt it again, forever. kvpool
   * drops it instead (docs/engines.md, requests that can never fit).
   */
  private futile(req: VllmRequest): boolean {
    return this.running.length === 0 && req.selfPreemptedAt >= 0 && req.numComputed <= req.selfPreemptedAt;
  }

  /** Drops a request that can never fit: rejected if it gave no token, truncated if it did. */
  private drop(req: VllmRequest): void {
    if (req.numOutputs === 0) this.counts.rejected++;
    else this.counts.truncated++;
    req.status = DROPPED;
    this.kv.release(req);
    this.dropped = req;
    this.counts.busySteps++;
  }
}
