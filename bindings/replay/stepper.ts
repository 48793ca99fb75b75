// The loop of the replay kernel (docs/replay-kernel.md), one request per step: runReplay()
// drives it to the end, and views that draw the pool between requests (the
// pool inspector) step it themselves. One loop, so both give the same result.

import {
  advanceOutputToken, nextOutputToken, outputToken, holdPromptTokens, keepPromptTokens, promptTokens, releasePromptTokens, type ReplayParams, type ReplayProgress, type ReplayResult, type ReplaySequence, type ReplayTarget,
} from './kernel.js';
import { MAX_SEQUENCE_TOKENS, checkBool, checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { TIMESTAMP_RULE, isTimestamp, type TraceRequest } from './trace.js';
import { TokenBuffers } from './token-buffers.js';

/** What one `step()` did. */
export interface ReplayStep {
  /** Index of the request admitted, or -1 for the final drain. */
  request: number;
  /** False when the request could not be placed (counted as rejected). */
  placed: boolean;
  /** Prompt blocks reused from the prefix cache. */
  matchedBlocks: number;
  /** Blocks newly allocated for the request (prompt and decode). */
  newBlocks: number;
  /** True when decoding stopped early for lack of blocks. */
  truncated: boolean;
  /**
   * Output tokens whose decode allocation succeeded: the request's
   * `outputLength`, or when truncated the index of the decode step that
   * failed (0 when the request was not placed).
   */
  outputs: number;
  /** Running sequences finished (deallocated) to make room or at the end. */
  finished: number;
}

/**
 * True while runReplay constructs its stepper: no code outside this module
 * ever sees that stepper's sequences, so their prompts may live in the core
 * only (ReplayTarget.keepsPrompt).
 */
let constructingSealed = false;

const PARAM_KEYS = ['blockSize', 'maxRunning', 'publishAfterPrefill', 'limit'];

function checkParams(p: ReplayParams): ReplayParams {
  checkObject('params', p);
  checkKeys('params', p, PARAM_KEYS);
  return {
    blockSize: checkInt('params.blockSize', p.blockSize, 1),
    maxRunning: checkInt('params.maxRunning', p.maxRunning, 1),
    publishAfterPrefill: checkBool('params.publishAfterPrefill', p.publishAfterPrefill),
    limit: p.limit === undefined ? undefined : checkInt('params.limit', p.limit, 0),
  };
}

export class ReplayStepper<S extends ReplaySequence> {
  /** Requests the replay will admit (the trace, cut to `params.limit`). */
  readonly total: number;
  private readonly B: number;
  private readonly fifo: S[] = [];
  private readonly fifoReq: number[] = [];
  /** With `keep`: the token buffer each running sequence was made with (its prompt is held by that key). */
  private readonly fifoBuf: Int32Array[] = [];
  /**
   * Each prompt is written into the core only and held there from the
   * sequence's admission to its deallocation (keepPromptTokens): a stepper
   * of runReplay's, on a target that reads tokens only through stagings.
   * Saves copying each prompt out to its buffer and back in at cache().
   */
  private readonly keep: boolean;
  /** With `keep`: the buffer of the request being admitted, held but not yet running. */
  private admitting: Int32Array | null = null;
  private head = 0;
  private r = 0;
  private drained = false;
  private rejected = 0;
  private truncated = 0;
  private promptBlocks = 0;
  private matchedBlocks = 0;
  private allocatedBlocks = 0;
  private idChecksum = 0;
  private allocateCalls = 0;
  private seconds = 0;
  private readonly evictedBefore: number;
  private finishedInStep = 0;
  /** Requests admitted through `admitRequest` (open-ended driving), not from `requests`. */
  private pushed = 0;
  /** Token buffers of finished sequences, reused for new ones. */
  private readonly buffers: TokenBuffers;

  readonly params: ReplayParams;

  constructor(
    readonly target: ReplayTarget<S>,
    readonly requests: readonly TraceRequest[],
    params: ReplayParams,
  ) {
    checkObject('target', target);
    if (!Array.isArray(requests)) throw new TypeError(`requests must be an array of trace requests, got ${describe(requests)}`);
    this.params = checkParams(params);
    this.B = this.params.blockSize;
    // Prompt blocks and hits are counted in params' blocks: the pool's must be the same.
    if (target.blockSize !== undefined && target.blockSize !== this.B) {
      throw new RangeError(`params.blockSize = ${this.B} differs from the target's pool's block size, ${target.blockSize}`);
    }
    this.buffers = new TokenBuffers(this.params.maxRunning);
    this.total = Math.min(requests.length, this.params.limit ?? Infinity);
    this.evictedBefore = target.blocksEvicted();
    this.keep = constructingSealed && target.holdsPrompt === true && target.keepsPrompt === true && target.advanceOutputs !== undefined;
  }

  /** Requests admitted (or rejected) so far. */
  get done(): number {
    return this.r;
  }

  /** True once every request ran and the running sequences were released. */
  get finished(): boolean {
    return this.drained;
  }

  /** The running sequences, oldest first (the next to finish comes first). */
  running(): S[] {
    return this.fifo.slice(this.head);
  }

  /** The sequence admitted last (placed, and still running), or undefined; no copy, unlike running(). */
  newest(): S | undefined {
    return this.fifo.length > this.head ? this.fifo[this.fifo.length - 1] : undefined;
  }

  /** Request index of each sequence `running()` returns, in the same order. */
  runningRequests(): number[] {
    return this.fifoReq.slice(this.head);
  }

  /** The result so far; after the last step, exactly what runReplay returns. */
  result(): ReplayResult {
    const t = this.target;
    return {
      requests: this.total + this.pushed,
      rejected: this.rejected,
      truncated: this.truncated,
      promptBlocks: this.promptBlocks,
      matchedBlocks: this.matchedBlocks,
      hitRate: this.promptBlocks === 0 ? 0 : Math.round((this.matchedBlocks / this.promptBlocks) * 1e6) / 1e6,
      evictedBlocks: t.blocksEvicted() - this.evictedBefore,
      allocatedBlocks: this.allocatedBlocks,
      idChecksum: this.idChecksum,
      freeBlocksAtEnd: t.numFreeBlocks(),
      cachedBlocksAtEnd: t.numBlocksInPrefixCache(),
      seconds: this.seconds,
      allocateCallsPerSecond: this.seconds > 0 ? Math.round(this.allocateCalls / this.seconds) : 0,
      ...t.extraResult?.(),
    };
  }

  /** Admits the next request (or, after the last one, releases every running sequence); null when finished. */
  step(): ReplayStep | null {
    if (this.drained) return null;
    const t0 = performance.now();
    this.finishedInStep = 0;
    let out: ReplayStep;
    try {
      if (this.r < this.total) {
        const r = this.r++;
        out = this.admit(this.requests[r]!, r);
      }
      else {
        while (this.live() > 0) this.finishOldest();
        this.drained = true;
        this.buffers.retire();
        out = { request: -1, placed: false, matchedBlocks: 0, newBlocks: 0, truncated: false, outputs: 0, finished: this.finishedInStep };
      }
    } catch (e) {
      // runReplay gives up on a stepper that threw: the prompts it holds go.
      if (this.keep) this.releaseHeld();
      throw e;
    }
    this.seconds += (performance.now() - t0) / 1000;
    return out;
  }

  /** With `keep`: ends the holds of every running sequence's prompt and of the one being admitted. */
  private releaseHeld(): void {
    for (let i = this.head; i < this.fifoBuf.length; i++) releasePromptTokens(this.fifoBuf[i]!);
    if (this.admitting !== null) releasePromptTokens(this.admitting);
    this.admitting = null;
  }

  /**
   * Open-ended driving (a fleet's engine, which learns its requests one at a
   * time): admits `req` now, exactly as `step()` admits a request of the
   * trace, as request number `index` (its output tokens are
   * `outputToken(index, i)`). Only before the drain; construct the stepper
   * with no requests and call `step()` once at the end to drain.
   */
  admitRequest(req: TraceRequest, index: number): ReplayStep {
    if (this.drained) throw new Error('admitRequest: the stepper has drained');
    if (this.r < this.total) throw new Error('admitRequest: the stepper still has requests of its own to step through');
    checkInt('index', index, 0); // admit checks the request, naming it trace[index]
    const t0 = performance.now();
    this.finishedInStep = 0;
    const out = this.admit(req, index);
    this.pushed++;
    this.seconds += (performance.now() - t0) / 1000;
    return out;
  }

  /**
   * Open-ended driving: finishes the oldest running sequence now (a fleet's
   * engine finishes sequences whose decoding ended); false when none runs.
   */
  finishOldestRunning(): boolean {
    if (this.drained) throw new Error('finishOldestRunning: the stepper has drained');
    if (this.live() === 0) return false;
    const t0 = performance.now();
    this.finishOldest();
    this.seconds += (performance.now() - t0) / 1000;
    return true;
  }

  private live(): number {
    return this.fifo.length - this.head;
  }

  private finishOldest(): void {
    const s = this.fifo[this.head]!;
    this.fifo[this.head] = undefined as unknown as S;
    const held = this.keep ? this.fifoBuf[this.head]! : null;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.fifo.length) {
      this.fifo.splice(0, this.head);
      this.fifoReq.splice(0, this.head);
      if (this.keep) this.fifoBuf.splice(0, this.head);
      this.head = 0;
    }
    this.finishedInStep++;
    // Kept prompts are held until their blocks are cached (at deallocation).
    if (held === null) this.target.deallocate(s);
    else {
      try {
        this.target.deallocate(s);
      } finally {
        releasePromptTokens(held);
      }
    }
    const buf = this.target.recycle?.(s);
    if (buf) this.buffers.give(buf);
  }

  private recordNew(s: S, from: number): number {
    const table = this.target.blockIds?.(s) ?? s.blockTable;
    const n = s.numBlocks;
    // A local (8.8 M ids over the trace), in int32 arithmetic: every sum
    // wraps with `| 0`, the same value mod 2^32 as the unsigned fold, where
    // sums kept exact as doubles and `>>> 0` ran ~4x slower.
    let h = this.idChecksum | 0;
    let i = from;
    // Eight ids at a time, h * 31^8 + a * 31^7 + ... + g * 31 + h': the
    // products are independent, where one id at a time waits on the last
    // multiply (four at a time: ~1.8x the time of eight). The powers of 31
    // are taken mod 2^32, as int32.
    for (; i + 8 <= n; i += 8) {
      const a = (Math.imul(h, -1807454463) + Math.imul(table[i]!, 1742810335)) | 0;
      const b = (Math.imul(table[i + 1]!, 887503681) + Math.imul(table[i + 2]!, 28629151)) | 0;
      const c = (Math.imul(table[i + 3]!, 923521) + Math.imul(table[i + 4]!, 29791)) | 0;
      const d = (Math.imul(table[i + 5]!, 961) + Math.imul(table[i + 6]!, 31)) | 0;
      h = (((a + b) | 0) + ((c + d) | 0) + table[i + 7]!) | 0;
    }
    for (; i < n; i++) h = (Math.imul(h, 31) + table[i]!) | 0;
    this.idChecksum = h >>> 0;
    this.allocatedBlocks += n - from;
    return n - from;
  }

  /**
   * Appends output tokens `first`, ... (`count` of them) to `s` and counts
   * their allocate calls: steps made or known to change nothing. `kept`: the
   * core holds the tokens already (keepPromptTokens).
   */
  private appendRun(s: S, first: number, count: number, kept: boolean): void {
    if (kept) this.target.advanceOutputs!(s, count);
    else if (this.target.appendOutputs) this.target.appendOutputs(s, first, count);
    else for (let j = 0, t = first; j < count; j++, t = nextOutputToken(t)) s.appendToken(t);
    s.kvCachedTokens = s.numTokens - 1;
    this.allocateCalls += count;
  }

  /** One iteration of runReplay's request loop. */
  private admit(req: TraceRequest, r: number): ReplayStep {
    checkRequest(req, r);
    const { target, params } = this;
    const L = req.inputLength;
    const need = L + req.outputLength + 1;
    const hold = target.holdsPrompt === true;
    const keep = this.keep;
    let placed = false;
    let s: S;
    let buffer: Int32Array | null = null;
    let kept = false;
    try {
      buffer = this.buffers.take(need);
      // A kept prompt's buffer: big enough that the sequence never moves to another (its prompt is held by this key).
      if (keep) this.admitting = buffer;
      if (keep) kept = keepPromptTokens(req, buffer, need, outputToken(r, 0));
      else if (hold) holdPromptTokens(req, buffer);
      else promptTokens(req, buffer);
      s = target.newSequence(buffer, L);
      while (this.live() >= params.maxRunning) this.finishOldest();
      while (true) {
        this.allocateCalls++;
        if (target.allocate(s)) {
          placed = true;
          break;
        }
        if (this.live() === 0) break;
        this.finishOldest();
      }
    } catch (e) {
      throw namedRequestError(e, r);
    } finally {
      // A held prompt is staged again at cache() (unless its stamps cover
      // it); a kept one stays held for that, the others end here.
      if (hold && buffer !== null && !(keep && placed)) {
        releasePromptTokens(buffer);
        this.admitting = null;
      }
    }
    if (!placed) {
      this.rejected++;
      return { request: r, placed: false, matchedBlocks: 0, newBlocks: 0, truncated: false, outputs: 0, finished: this.finishedInStep };
    }
    this.promptBlocks += Math.floor(L / this.B);
    const matched = s.sharedBlocks;
    this.matchedBlocks += matched;
    let newBlocks = this.recordNew(s, matched);
    target.prefilled?.(s);
    s.kvCachedTokens = L;
    let cut = false;
    let token = outputToken(r, 0);
    const outputs = req.outputLength;
    let decoded = outputs;
    for (let i = 0; i < outputs; i++, token = nextOutputToken(token)) {
      // Step i's first allocation was made, and failed, by a run of steps below.
      let failed = false;
      if (i > 0) {
        // Steps that cannot change the pool (the block has room): their
        // tokens are appended and their allocate calls counted, not made.
        // Step 0 always runs (it may publish).
        // With decodeSteps, the rest of the steps are made in one call too
        // (those that need a block together); it stops at a step that fails.
        let k = -1;
        if (target.decodeSteps !== undefined) {
          const before = s.numBlocks;
          k = target.decodeSteps(s, outputs - i);
          if (k > outputs - i) throw new Error(`decodeSteps made ${k} steps of the ${outputs - i} asked for`);
          if (k >= 0) {
            this.appendRun(s, token, k, kept);
            token = advanceOutputToken(token, k);
            if (s.numBlocks > before) newBlocks += this.recordNew(s, before);
            i += k;
            if (i === outputs) break;
            failed = true;
            k = 0;
          }
        }
        if (k < 0) k = target.decodeRoom?.(s) ?? 0;
        if (k > outputs - i) k = outputs - i;
        if (k > 0) {
          this.appendRun(s, token, k, kept);
          token = advanceOutputToken(token, k);
          i += k;
          if (i === outputs) break;
        }
      }
      if (kept) this.target.advanceOutputs!(s, 1);
      else s.appendToken(token);
      s.kvCachedTokens = s.numTokens - 1;
      let ok = false;
      const before = s.numBlocks;
      while (true) {
        this.allocateCalls++;
        if (failed) failed = false;
        else if (target.allocate(s, s.numTokens)) {
          ok = true;
          break;
        }
        if (this.live() === 0) break;
        this.finishOldest();
      }
      if (!ok) {
        this.truncated++;
        cut = true;
        decoded = i;
        break;
      }
      if (s.numBlocks > before) newBlocks += this.recordNew(s, before); // most decode steps add no block
      if (i === 0 && params.publishAfterPrefill) target.cache(s);
    }
    this.fifo.push(s);
    this.fifoReq.push(r);
    if (keep) {
      this.fifoBuf.push(this.admitting!);
      this.admitting = null;
    }
    return { request: r, placed: true, matchedBlocks: matched, newBlocks, truncated: cut, outputs: decoded, finished: this.finishedInStep };
  }
}

/**
 * Checks request `r` of a trace before any of it is used (its hash ids are
 * checked as its prompt is written); the errors name it trace[r]. The
 * names are built only for a bad request.
 */
export function checkRequest(req: TraceRequest, r: number): void {
  if (req === null || typeof req !== 'object') {
    throw new TypeError(`trace[${r}] must be a trace request ({ inputLength, outputLength, hashIds }), got ${describe(req)}`);
  }
  const L = req.inputLength;
  const O = req.outputLength;
  if (Number.isInteger(L) && L >= 0 && L <= MAX_SEQUENCE_TOKENS && Number.isInteger(O) && O >= 0 && O <= MAX_SEQUENCE_TOKENS - L) return;
  checkInt(`trace[${r}].inputLength`, L, 0, MAX_SEQUENCE_TOKENS);
  checkInt(`trace[${r}].outputLength`, O, 0, MAX_SEQUENCE_TOKENS - L);
}

/**
 * Checks the requests of `trace` a replay of `limit` takes (all when
 * undefined) up front (checkRequest each), for a loop whose requests others
 * read before its stepper would (a fleet's routers).
 */
export function checkRequests(trace: readonly TraceRequest[], limit: number | undefined): void {
  if (!Array.isArray(trace)) throw new TypeError(`options.trace must be an array of trace requests, got ${describe(trace)}`);
  const n = Math.min(trace.length, limit ?? Infinity);
  for (let i = 0; i < n; i++) {
    const req = trace[i]!;
    checkRequest(req, i);
    // The fleet's step clock counts to it.
    if (req.timestamp !== undefined && !isTimestamp(req.timestamp)) {
      throw new RangeError(`trace[${i}].timestamp must be ${TIMESTAMP_RULE}, got ${describe(req.timestamp)}`);
    }
  }
}

/** An error of writing request `r`'s prompt (named `req.…` there) as one naming trace[r]; any other error as it is. */
export function namedRequestError(e: unknown, r: number): unknown {
  if (!(e instanceof TypeError || e instanceof RangeError) || !e.message.startsWith('req.')) return e;
  return new (e instanceof TypeError ? TypeError : RangeError)(`trace[${r}].${e.message.slice(4)}`);
}

/** Runs the replay kernel's loop (docs/replay-kernel.md, the loop) over `requests` and returns its result object. */
export function runReplay<S extends ReplaySequence>(
  target: ReplayTarget<S>,
  requests: readonly TraceRequest[],
  params: ReplayParams,
  onProgress?: ReplayProgress,
): ReplayResult {
  const { blockSize, maxRunning, publishAfterPrefill, limit } = params;
  constructingSealed = true;
  let stepper: ReplayStepper<S>;
  try {
    stepper = new ReplayStepper(target, requests, { blockSize, maxRunning, publishAfterPrefill, limit });
  } finally {
    constructingSealed = false;
  }
  const total = stepper.total;
  const progressEvery = Math.max(1, Math.floor(total / 200));
  while (stepper.step()) {
    const r = stepper.done;
    if (onProgress && r % progressEvery === 0 && r < total) onProgress(r, total);
  }
  onProgress?.(total, total);
  return stepper.result();
}
