// A request as vLLM v1's scheduler sees it (docs/engines.md, the vLLM engine):
// its prompt, the output tokens it has given, the tokens whose KV is
// computed, and where it stands. Its tokens follow the replay kernel
// (docs/replay-kernel.md, tokens): the prompt from its trace line's hash ids,
// output token i of request r is 2^30 + ((r * 65536 + i) mod 2^30).

import type { TraceRequest } from '../replay/trace.js';

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
  /** @internal The KV-cache manager's slot for it (-1: none yet). */
  kvSlot = -1;

  constructor(
    /** Its index in the trace: the seed of its output tokens, and its id. */
    readonly index: number,
    readonly trace: TraceRequest,
  ) {
    this.promptLength = trace.inputLength;
    this.maxOutputs = Math.max(trace.outputLength, 1);
  }

  /** Prompt and output tokens so far. */
  get numTokens(): number {
    return this.promptLength + this.numOutputs;
  }
}
