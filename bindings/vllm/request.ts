// A request as vLLM v1's scheduler sees it (docs/engines.md, the vLLM engine):
// its prompt, the output tokens it has given, the tokens whose KV is
// computed, and where it stands. Its tokens follow the replay kernel
// (docs/replay-kernel.md, tokens): the prompt from its trace line's hash ids,
// output token i of request r is 2^30 + ((r * 65536 + i) mod 2^30).

import type { TraceRequest } from '../replay/trace.js';
import { MAX_SEQUENCE_TOKENS, checkInt, describe } from '../validate.js';

/** Queued, never scheduled. */
export const WAITING = 0;
export const RUNNING = 1;
/** Preempted: back in the queue, its KV to be computed again. */
export const PREEMPTED = 2;
export const FINISHED = 3;
/** Dropped: it could never fit the pool, even alone (rejected, or truncated when it had given tokens). */
export const DROPPED = 4;
export type VllmRequestStatus = typeof WAITING | typeof RUNNING | typeof PREEMPTED | typeof FINISHED | typeof DROPPED;

export class VllmRequest {
  /** Prompt tokens. */
  readonly promptLength: number;
  /**
   * Output tokens it gives in all: the trace's output length, at least 1
   * (vLLM samples a token after the prompt before it checks the limit).
   */
  readonly maxOutputs: number;
  /** Tokens whose KV is computed (after a step is scheduled, as vLLM advances it). */
  numComputed = 0;
  /** Output tokens given so far. */
  numOutputs = 0;
  status: VllmRequestStatus = WAITING;
  numPreemptions = 0;
  /** Tokens scheduled for it in the step being run (0 when not scheduled). */
  scheduled = 0;
  /** The dp rank it runs on. */
  rank = 0;
  /** Its computed tokens when it last preempted itself with nothing else running (-1: never). */
  selfPreemptedAt = -1;
  /** @internal Queued by a scheduler once (a request is queued once in its life). */
  queued = false;
  /** @internal The KV-cache manager's slot for it (-1: none yet). */
  kvSlot = -1;

  /** Checks the trace line first: a prompt of at least one token (vLLM computes one at least), an id per 512 of its tokens. */
  constructor(
    /** Its index in the trace: the seed of its output tokens, and its id. */
    readonly index: number,
    readonly trace: TraceRequest,
  ) {
    checkVllmTraceRequest(index, trace);
    this.promptLength = trace.inputLength;
    this.maxOutputs = Math.max(trace.outputLength, 1);
  }

  /** Prompt and output tokens so far. */
  get numTokens(): number {
    return this.promptLength + this.numOutputs;
  }
}

/** Throws (naming request `index` and the field) unless `t` is a trace request the vLLM engine can run. */
export function checkVllmTraceRequest(index: number, t: TraceRequest): void {
  checkInt('request index', index, 0, Number.MAX_SAFE_INTEGER);
  if (t === null || typeof t !== 'object') throw new TypeError(`trace request ${index} must be a trace request, got ${describe(t)}`);
  const L = checkInt(`trace request ${index}: inputLength`, t.inputLength, 1, MAX_SEQUENCE_TOKENS);
  checkInt(`trace request ${index}: outputLength`, t.outputLength, 0, MAX_SEQUENCE_TOKENS - L);
  const ids = t.hashIds;
  const need = Math.ceil(L / 512);
  if (ids === null || typeof ids !== 'object' || !(ids.length >= need)) throw new RangeError(`trace request ${index}: hashIds must hold ${need} ids for its ${L} tokens`);
  for (let c = 0; c < need; c++) {
    const v = ids[c];
    // The name is built only for a bad id.
    if (typeof v !== 'number' || (v | 0) !== v || v < 0 || v > 4194303) checkInt(`trace request ${index}: hashIds[${c}]`, v, 0, 4194303);
  }
}
