// Why no fleet can meet a TTFT target, when that is knowable from the trace
// and the timing model alone (docs/fleet-time.md, meeting an SLO): a
// request's first token comes at the end of the step that computes the last
// of its prompt, so its TTFT is at least the time of its prefill alone, on
// an idle engine, with every prefix an earlier request shares already in
// the cache. When the 99th percentile of those floors is above the target,
// no number of engines meets it.

import type { TraceRequest } from '../replay/trace.js';
import { latencyFigures } from './latency-figures.js';
import { addChunk, clearStepBatch, emptyStepBatch, type TimingModel } from '../timing/timing-model.js';
import type { FleetConfig } from './fleet-options.js';
import type { FleetRun } from './fleet-result.js';
import type { TimedScheduler } from './timed-options.js';
import { fixed } from '../number-text.js';

/** Tokens of a hash id's chunk (the kernel's prompt: hash_ids[p / 512] * 512 + p % 512). */
const CHUNK = 512;

export interface FloorEngine {
  blockSize: number;
  dpSize: number;
  scheduler: TimedScheduler;
  /** 'continuous' and 'vllm': the most prompt tokens a step computes. */
  maxNumBatchedTokens?: number;
  /** 'vllm': the most tokens of one prefill a step computes (0: no cap). */
  longPrefillTokenThreshold?: number;
}

export interface TtftFloor {
  /** 99th percentile of the requests' floors (ms), as a run's figures give TTFT's (linear, rounded to 1e-3): never above a run's p99 TTFT. */
  p99: number;
  /** Requests whose floor exceeds the target. */
  over: number;
  /** Requests considered. */
  count: number;
  /** The request with the highest floor. */
  longest: { request: number; tokens: number; ms: number };
}

interface Node {
  next: Map<number, Node>;
  /** The longest prompt of the earlier requests whose ids pass through here. */
  maxLen: number;
}

/**
 * Per request, the most prompt tokens an earlier request of the trace could
 * have left in a cache: the tokens it shares with the longest matching
 * prefix of ids, in whole blocks, at most all but one (a prompt always
 * computes a token).
 */
export function cacheableTokens(trace: readonly TraceRequest[], n: number, blockSize: number): Int32Array {
  const out = new Int32Array(n);
  const root: Node = { next: new Map(), maxLen: 0 };
  for (let r = 0; r < n; r++) {
    const req = trace[r]!;
    const P = req.inputLength;
    const chunks = Math.min(req.hashIds.length, Math.ceil(P / CHUNK));
    let node = root;
    let best = 0;
    for (let d = 0; d < chunks; d++) {
      const child = node.next.get(req.hashIds[d]!);
      if (child === undefined) break;
      node = child;
      best = Math.max(best, Math.min(P, node.maxLen, (d + 1) * CHUNK));
    }
    // Whole blocks, and never the whole prompt (the exact-prompt rule computes its last block again).
    out[r] = Math.floor(Math.min(best, P - 1) / blockSize) * blockSize;
    // This request's path, for the ones after it.
    node = root;
    for (let d = 0; d < chunks; d++) {
      const id = req.hashIds[d]!;
      let child = node.next.get(id);
      if (child === undefined) node.next.set(id, (child = { next: new Map(), maxLen: 0 }));
      if (P > child.maxLen) child.maxLen = P;
      node = child;
    }
  }
  return out;
}

/**
 * The ms of a request's prefill alone on an idle engine: one chunk
 * ('xllm'), or chunks of the budget one step each ('continuous'; 'vllm'
 * cut to its long-prefill threshold too).
 */
function prefillAloneMs(model: TimingModel, e: FloorEngine, tokens: number, cached: number): number {
  const b = emptyStepBatch();
  b.dpRanks = e.dpSize;
  const cap = e.scheduler === 'vllm' && (e.longPrefillTokenThreshold ?? 0) > 0 ? e.longPrefillTokenThreshold! : Infinity;
  const budget = e.scheduler === 'xllm' ? Infinity : Math.max(1, Math.min(e.maxNumBatchedTokens ?? Infinity, cap));
  let ms = 0;
  for (let done = cached; done < tokens; ) {
    const chunk = Math.min(tokens - done, budget);
    clearStepBatch(b);
    b.cachedTokens = done === cached ? cached : 0;
    addChunk(b, chunk, done);
    ms += model.stepMs(b);
    done += chunk;
  }
  return ms;
}

/** Each of the first `n` requests' TTFT floor under `model` on engines of `e` (ms). */
export function ttftFloors(trace: readonly TraceRequest[], n: number, model: TimingModel, e: FloorEngine): Float64Array {
  const cached = cacheableTokens(trace, n, e.blockSize);
  const floors = new Float64Array(n);
  for (let r = 0; r < n; r++) floors[r] = prefillAloneMs(model, e, trace[r]!.inputLength, cached[r]!);
  return floors;
}

/** The floors of the first `n` requests' TTFTs under `model` on engines of `e`, against `targetMs`. */
export function ttftFloor(trace: readonly TraceRequest[], n: number, model: TimingModel, e: FloorEngine, targetMs: number): TtftFloor {
  const floors = ttftFloors(trace, n, model, e);
  let over = 0;
  let longest = { request: -1, tokens: 0, ms: -Infinity };
  for (let r = 0; r < n; r++) {
    const ms = floors[r]!;
    if (ms > targetMs) over++;
    if (ms > longest.ms) longest = { request: r, tokens: trace[r]!.inputLength, ms };
  }
  // The percentile meetsSlo judges (latencyFigures'): a floor under each TTFT puts this p99 under the run's.
  return { p99: latencyFigures(floors, n).p99, over, count: n, longest };
}

const ms1 = (x: number) => fixed(x, 1);

/**
 * "no fleet can meet it: ..." when the floors' p99 is above the TTFT target
 * (a sentence for the SLO answer), else undefined: the target may be met by
 * some fleet, or missed for reasons of load the floor does not see.
 */
export function ttftFloorReason(f: TtftFloor, targetMs: number, modelName: string): string | undefined {
  if (f.count === 0 || f.p99 <= targetMs) return undefined;
  const l = f.longest;
  return (
    `no fleet can meet it: under the timing model (${modelName}), ${f.over.toLocaleString('en-US')} of the ${f.count.toLocaleString('en-US')} requests take longer than ${targetMs} ms to their first token ` +
    `even alone on an idle engine with every prefix an earlier request shares already cached (p99 of those times ${ms1(f.p99)} ms; ` +
    `the longest, request ${l.request} of ${l.tokens.toLocaleString('en-US')} prompt tokens, ${ms1(l.ms)} ms)`
  );
}

/**
 * Why no fleet of configuration `c` (any engine count) can meet `slo`, when
 * the TTFT floor of the first `n` requests of `trace` under `model` says
 * so: the reason, or undefined. Needs no run: sloSearch asks it before the
 * first.
 */
export function floorReason(c: FleetConfig, trace: readonly TraceRequest[], n: number, model: TimingModel, slo: { ttftMs?: number }): string | undefined {
  if (slo.ttftMs === undefined || c.scheduler === undefined) return undefined;
  const floor = ttftFloor(trace, Math.min(n, trace.length), model, {
    blockSize: c.blockSize, dpSize: c.dpSize, scheduler: c.scheduler,
    ...(c.maxNumBatchedTokens !== undefined && { maxNumBatchedTokens: c.maxNumBatchedTokens }),
    ...(c.longPrefillTokenThreshold !== undefined && { longPrefillTokenThreshold: c.longPrefillTokenThreshold }),
  }, slo.ttftMs);
  return ttftFloorReason(floor, slo.ttftMs, model.name);
}

/**
 * Why `run` (the largest fleet tried, which did not meet `slo`) could not,
 * when the TTFT floor says so: the reason, or undefined. `trace` is the
 * run's trace (its first `run.requests` requests ran), `model` its timing
 * model.
 */
export function noFleetReason(run: FleetRun, trace: readonly TraceRequest[], model: TimingModel, slo: { ttftMs?: number }): string | undefined {
  return floorReason(run.config, trace, run.requests, model, slo);
}
