// The replay kernel (docs/replay-kernel.md): a deterministic closed-loop trace replay
// that pins ids, hits and evictions. Written against a small interface so
// the same loop drives the Wasm pool and the test reference model.

import { isCoreLoaded, plainCore } from '../core/plain-core.js';
import { MAX_SEQUENCE_TOKENS, checkInt, describe } from '../validate.js';
import type { TraceRequest } from './trace.js';

/** The sequence operations the loop uses. */
export interface ReplaySequence {
  readonly numTokens: number;
  readonly numBlocks: number;
  readonly sharedBlocks: number;
  kvCachedTokens: number;
  appendToken(token: number): void;
  /** Block ids in logical order. */
  readonly blockTable: ArrayLike<number>;
}

/** The pool operations the loop uses. */
export interface ReplayTarget<S extends ReplaySequence> {
  /** Optional: the block size the target's pool works in; the loop refuses params of another. */
  readonly blockSize?: number;
  /**
   * A sequence whose prompt is `buffer[0, promptLength)`. The buffer is fresh
   * and sized for the whole request (prompt + outputs); the target may keep it.
   * `outputsFrom` (default `promptLength`): where the request's generated
   * tokens begin, which is earlier when a recompute's prompt holds the tokens
   * it gave before a preemption (the 'priority' replay marks them from there).
   */
  newSequence(buffer: Int32Array, promptLength: number, outputsFrom?: number): S;
  allocate(seq: S, numTokens?: number): boolean;
  cache(seq: S): void;
  deallocate(seq: S): void;
  /** Prefix-cache entries evicted so far, failed allocations' walks included. */
  blocksEvicted(): number;
  numFreeBlocks(): number;
  numBlocksInPrefixCache(): number;
  /** Optional: called once a request's prompt is placed, before it counts as computed (linear-state checkpoints). */
  prefilled?(seq: S): void;
  /** Optional: figures the target adds to the result (`linearState`). */
  extraResult?(): Pick<ReplayResult, 'linearState'>;
  /**
   * Optional: after `deallocate(seq)`, the sequence's token buffer for a later
   * `newSequence` (the loop never touches the sequence again). Saves
   * allocating and collecting one buffer per request.
   */
  recycle?(seq: S): Int32Array | undefined;
  /**
   * Optional: how many more tokens `seq` can take, one decode step each,
   * with every `allocate(seq, seq.numTokens)` on the way returning true and
   * changing nothing (0 when unknown). The loop appends those tokens and
   * counts the calls without making them.
   */
  decodeRoom?(seq: S): number;
  /**
   * Optional: appends `count` output tokens to `seq`, `first` then each the
   * next as nextOutputToken gives it, in one call (the tokens of the decode
   * steps decodeRoom lets the loop count; millions over a trace). Without
   * it the loop calls appendToken for each.
   */
  appendOutputs?(seq: S, first: number, count: number): void;
  /**
   * Optional: the sequence's block ids without making a view (ids at
   * [0, numBlocks); valid until the sequence next changes). The loop reads
   * the table after every allocation that added blocks.
   */
  blockIds?(seq: S): ArrayLike<number>;
  /**
   * Optional: the allocate calls of the next `steps` decode steps of `seq`
   * (step j: `allocate(seq, numTokens + j + 1)`), made before their tokens
   * are appended and as those calls would make them, stopping at the first
   * that fails (that call made, and failed). Returns the steps that
   * succeeded, or -1 when it cannot (the loop then makes every call). The
   * loop appends the tokens and counts the calls.
   */
  decodeSteps?(seq: S, steps: number): number;
  /**
   * @internal Optional: true when the target's sequences read their prompt
   * from the very buffer newSequence was given, and nothing it does writes
   * that prompt. The loop then leaves each prompt in the core's staging
   * memory until its prefill returns, and the pool's stagings of it copy
   * nothing (holdPromptTokens).
   */
  readonly holdsPrompt?: boolean;
  /**
   * @internal Optional, with holdsPrompt: true when, besides, every read the
   * target makes of a sequence's tokens is a staging into the core (none
   * reads them in JS). runReplay's loop, whose sequences no other code
   * sees, then writes each prompt into the core only and holds it there
   * until the sequence is deallocated (keepPromptTokens). Needs
   * advanceOutputs.
   */
  readonly keepsPrompt?: boolean;
  /**
   * @internal Optional, with keepsPrompt: appendOutputs for a sequence whose
   * output tokens the core holds already (keepPromptTokens wrote them):
   * advances `seq` past `count` tokens without writing its buffer.
   */
  advanceOutputs?(seq: S, count: number): void;
}

/** What a replay with linear state adds to the result (docs/linear-state.md, replaying a trace). */
export interface ReplayLinearStateResult {
  /** Prefills that restored the recurrent state from a checkpoint. */
  checkpointHits: number;
  /** Checkpoints committed (one per block boundary a prefill reached and could get a slot for). */
  checkpointsSaved: number;
  /** Checkpoints evicted to free a slot. */
  checkpointEvictions: number;
  /** Prefix-cache hit blocks given back because no checkpoint covered their boundary. */
  trimmedBlocks: number;
}

export interface ReplayParams {
  blockSize: number;
  maxRunning: number;
  publishAfterPrefill: boolean;
  limit?: number;
}

export interface ReplayResult {
  requests: number;
  rejected: number;
  truncated: number;
  promptBlocks: number;
  matchedBlocks: number;
  hitRate: number;
  evictedBlocks: number;
  allocatedBlocks: number;
  idChecksum: number;
  freeBlocksAtEnd: number;
  cachedBlocksAtEnd: number;
  seconds: number;
  allocateCallsPerSecond: number;
  /** Only when the target replays with linear state. */
  linearState?: ReplayLinearStateResult;
}

const PROMPT_CHUNK = 512;
export const OUTPUT_BASE = 1073741824;
/** The largest output token; the next one is OUTPUT_BASE again. */
export const OUTPUT_LAST = 2 * OUTPUT_BASE - 1;
/** Largest hash id: id * 512 + 511 must be an int32 token. */
export const MAX_HASH_ID = Math.floor((0x7fffffff - (PROMPT_CHUNK - 1)) / PROMPT_CHUNK);

/**
 * Prompt tokens of a request, hash_ids[p / 512] * 512 + p % 512, written to
 * `out[0, inputLength)` (a new array when none is given).
 */
export function promptTokens(req: TraceRequest, out?: Int32Array): Int32Array {
  return writePrompt(req, out, HOLD_NONE);
}

/** How writePrompt leaves a prompt: not held, or held (and copied out either way). */
const HOLD_NONE = 0;
const HOLD_COPY = 1;

/**
 * @internal promptTokens into `out`, the core's copy kept in its staging
 * memory: the pool's stagings of `out`'s prompt copy nothing until
 * releasePromptTokens(). The caller promises that nothing writes the prompt
 * in between (the replay loop, for the length of a prefill).
 */
export function holdPromptTokens(req: TraceRequest, out: Int32Array): Int32Array {
  return writePrompt(req, out, HOLD_COPY);
}

/**
 * @internal holdPromptTokens without the copy out, outputs included: the
 * request's prompt and its `req.outputLength` output tokens (`firstOutput`
 * then each the next, as nextOutputToken gives them) are written only into
 * the core's staging memory, and `out` is left as it was. The hold lasts
 * until releasePromptTokens(out), however many calls come in between;
 * every staging of `out[0, inputLength + outputLength)` in that time reads
 * the core's copy, so the caller may advance its sequence past output
 * tokens without writing them (ReplayTarget.advanceOutputs). Only for a
 * caller whose sequences no code but the pool's reads until then (the
 * replay loop of runReplay). `room`: the tokens `out` may come to hold
 * (at least both counts, at most its length), reserved in the core now.
 * Returns false, having written the prompt to `out` and held nothing, when
 * the core is not loaded.
 */
export function keepPromptTokens(req: TraceRequest, out: Int32Array, room: number, firstOutput: number): boolean {
  const t = checkPromptArgs(req, out);
  const outputs = checkInt('req.outputLength', req.outputLength, 0, MAX_SEQUENCE_TOKENS - req.inputLength);
  checkInt('room', room, req.inputLength + outputs, out.length);
  checkInt('firstOutput', firstOutput, OUTPUT_BASE, OUTPUT_LAST);
  if (!isCoreLoaded()) {
    fillPromptJs(req, t);
    return false;
  }
  const rt = plainCore();
  const L = req.inputLength;
  const dst = writeCorePrompt(req, rt.staging.holdPrompt(t, L + outputs, room));
  const straight = outputsBeforeWrap(firstOutput, outputs);
  rt.ex.replay_token_run(dst + L * 4, firstOutput, straight);
  if (straight < outputs) rt.ex.replay_token_run(dst + (L + straight) * 4, OUTPUT_BASE, outputs - straight);
  return true;
}

function writePrompt(req: TraceRequest, out: Int32Array | undefined, hold: number): Int32Array {
  const t = checkPromptArgs(req, out);
  // With the core loaded (always, in a replay) it writes them with SIMD and
  // they are copied out in one go: 145 M tokens over the conversation trace.
  if (!isCoreLoaded()) return fillPromptJs(req, t);
  const rt = plainCore();
  // `t` may be a recycled buffer the staging still holds as another prompt.
  rt.staging.dropPrompt(t);
  const L = req.inputLength;
  if (L < 512) return fillPromptJs(req, t);
  const dst = writeCorePrompt(req, hold === HOLD_COPY ? rt.staging.holdPrompt(t, L) : rt.staging.byteSpace(L * 4));
  t.set(rt.i32.subarray(dst >>> 2, (dst >>> 2) + L));
  return t;
}

/** Writes the request's prompt tokens at `dst` (core memory); returns `dst`. */
function writeCorePrompt(req: TraceRequest, dst: number): number {
  const rt = plainCore();
  const ids = rt.staging.stageIds(req.hashIds, 0, Math.ceil(req.inputLength / PROMPT_CHUNK));
  rt.ex.replay_prompt_tokens(ids, req.inputLength, dst);
  return dst;
}

/** @internal Ends what holdPromptTokens or keepPromptTokens promised for `out`: the pool copies its tokens in again. */
export function releasePromptTokens(out: Int32Array): void {
  if (isCoreLoaded()) plainCore().staging.dropPrompt(out);
}

/**
 * What both fills need: a request with an id per 512-token chunk, and room
 * for its prompt (checked before anything is allocated). Returns the array to fill.
 */
function checkPromptArgs(req: TraceRequest, out: Int32Array | undefined): Int32Array {
  if (req === null || typeof req !== 'object') throw new TypeError(`req must be a trace request, got ${describe(req)}`);
  const L = checkInt('req.inputLength', req.inputLength, 0, MAX_SEQUENCE_TOKENS);
  const ids = req.hashIds;
  if (ids === null || typeof ids !== 'object' || !Number.isSafeInteger(ids.length) || ids.length < 0) {
    throw new TypeError(`req.hashIds must be an array of integers, got ${describe(ids)}`);
  }
  const need = Math.ceil(L / PROMPT_CHUNK);
  if (ids.length < need) throw new RangeError(`req.hashIds has ${ids.length} ids but inputLength ${L} needs ${need}`);
  for (let c = 0; c < need; c++) {
    // The name is built only for a bad id: building it for each of the
    // trace's ~290,000 ids cost a string each.
    const v = ids[c];
    if (typeof v !== 'number' || (v | 0) !== v || v < 0 || v > MAX_HASH_ID) checkInt(`req.hashIds[${c}]`, v, 0, MAX_HASH_ID);
  }
  if (out === undefined) return new Int32Array(L);
  if (!(out instanceof Int32Array) || out.length < L) {
    throw new RangeError(`out must be an Int32Array of length >= req.inputLength ${L}, got ${out instanceof Int32Array ? `length ${out.length}` : describe(out)}`);
  }
  return out;
}

/** promptTokens in plain JS (before the core is loaded; the reference in tests). */
export function promptTokensJs(req: TraceRequest, out?: Int32Array): Int32Array {
  return fillPromptJs(req, checkPromptArgs(req, out));
}

function fillPromptJs(req: TraceRequest, t: Int32Array): Int32Array {
  const L = req.inputLength;
  const ids = req.hashIds;
  // Unrolled by 8 (512 is a multiple): ~2.4x faster than one token per
  // iteration in V8.
  const full = Math.floor(L / PROMPT_CHUNK);
  for (let c = 0; c < full; c++) {
    let p = c * PROMPT_CHUNK;
    const off = ids[c]! * PROMPT_CHUNK - p; // token at p is p + off
    for (const end = p + PROMPT_CHUNK; p < end; p += 8) {
      t[p] = p + off;
      t[p + 1] = p + 1 + off;
      t[p + 2] = p + 2 + off;
      t[p + 3] = p + 3 + off;
      t[p + 4] = p + 4 + off;
      t[p + 5] = p + 5 + off;
      t[p + 6] = p + 6 + off;
      t[p + 7] = p + 7 + off;
    }
  }
  if (L > full * PROMPT_CHUNK) {
    const off = ids[full]! * PROMPT_CHUNK - full * PROMPT_CHUNK;
    for (let p = full * PROMPT_CHUNK; p < L; p++) t[p] = p + off;
  }
  return t;
}

/** Output token `i` of request `r`. */
export function outputToken(r: number, i: number): number {
  return OUTPUT_BASE + ((r * 65536 + i) % OUTPUT_BASE);
}

/**
 * Output token i + 1 of a request, given token i: one more, wrapping from
 * 2^31 - 1 back to 2^30 exactly where outputToken's modulo wraps. (The
 * modulo of a number past int32 is a floating-point fmod, ~14 ns here; the
 * loop makes 4.8 M of them over the conversation trace.)
 */
export function nextOutputToken(token: number): number {
  return token === OUTPUT_LAST ? OUTPUT_BASE : token + 1;
}

/** How many of `count` output tokens from `first` on come before the wrap back to OUTPUT_BASE. */
export function outputsBeforeWrap(first: number, count: number): number {
  return Math.min(count, OUTPUT_LAST - first + 1);
}

/** Output token i + k of a request, given token i (nextOutputToken k times). */
export function advanceOutputToken(token: number, k: number): number {
  return OUTPUT_BASE + ((token - OUTPUT_BASE + k) % OUTPUT_BASE);
}

export interface ReplayProgress {
  (done: number, total: number): void;
}
