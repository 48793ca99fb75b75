// The replay kernel (REPLAY.md): a deterministic closed-loop trace replay
// that pins ids, hits and evictions. Written against a small interface so
// the same loop drives the Wasm pool and the test reference model.

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
  /**
   * A sequence whose prompt is `buffer[0, promptLength)`. The buffer is fresh
   * and sized for the whole request (prompt + outputs); the target may keep it.
   */
  newSequence(buffer: Int32Array, promptLength: number): S;
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
}

/** What a replay with linear state adds to the result (see the README's "Linear state"). */
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
const OUTPUT_BASE = 1073741824;

/** Prompt tokens of a request, hash_ids[p / 512] * 512 + p % 512, written to `t[0, L)`. */
export function promptTokens(req: TraceRequest, t: Int32Array = new Int32Array(req.inputLength)): Int32Array {
  const L = req.inputLength;
  const ids = req.hashIds;
  for (let c = 0, p = 0; p < L; c++) {
    const base = ids[c]! * PROMPT_CHUNK;
    const end = Math.min(L, p + PROMPT_CHUNK);
    for (let k = 0; p < end; p++, k++) t[p] = base + k;
  }
  return t;
}

/** Output token `i` of request `r`. */
export function outputToken(r: number, i: number): number {
  return OUTPUT_BASE + ((r * 65536 + i) % OUTPUT_BASE);
}

export interface ReplayProgress {
  (done: number, total: number): void;
}

/** Runs the loop of REPLAY.md over `requests` and returns its result object. */
export function runReplay<S extends ReplaySequence>(
  target: ReplayTarget<S>,
  requests: readonly TraceRequest[],
  params: ReplayParams,
  onProgress?: ReplayProgress,
): ReplayResult {
  const B = params.blockSize;
  const total = Math.min(requests.length, params.limit ?? Infinity);
  const running: S[] = [];
  let head = 0; // `running` is a FIFO: live entries are running[head..]
  let rejected = 0, truncated = 0, promptBlocks = 0, matchedBlocks = 0;
  let allocatedBlocks = 0, idChecksum = 0, allocateCalls = 0;
  const evictedBefore = target.blocksEvicted();

  const recordNew = (s: S, from: number) => {
    const table = s.blockTable;
    for (let i = from; i < table.length; i++) idChecksum = (Math.imul(idChecksum, 31) + table[i]!) >>> 0;
    allocatedBlocks += table.length - from;
  };
  const finishOldest = () => {
    const s = running[head]!;
    running[head++] = undefined as unknown as S;
    if (head > 1024 && head * 2 > running.length) {
      running.splice(0, head);
      head = 0;
    }
    target.deallocate(s);
  };
  const live = () => running.length - head;

  const progressEvery = Math.max(1, Math.floor(total / 200));
  const t0 = performance.now();
  for (let r = 0; r < total; r++) {
    const req = requests[r]!;
    const L = req.inputLength;
    const s = target.newSequence(promptTokens(req, new Int32Array(L + req.outputLength + 1)), L);
    while (live() >= params.maxRunning) finishOldest();
    let placed = false;
    while (true) {
      allocateCalls++;
      if (target.allocate(s)) {
        placed = true;
        break;
      }
      if (live() === 0) break;
      finishOldest();
    }
    if (!placed) {
      rejected++;
      continue;
    }
    promptBlocks += Math.floor(L / B);
    const matched = s.sharedBlocks;
    matchedBlocks += matched;
    recordNew(s, matched);
    target.prefilled?.(s);
    s.kvCachedTokens = L;
    for (let i = 0; i < req.outputLength; i++) {
      s.appendToken(outputToken(r, i));
      s.kvCachedTokens = s.numTokens - 1;
      let ok = false;
      const before = s.numBlocks;
      while (true) {
        allocateCalls++;
        if (target.allocate(s, s.numTokens)) {
          ok = true;
          break;
        }
        if (live() === 0) break;
        finishOldest();
      }
      if (!ok) {
        truncated++;
        break;
      }
      recordNew(s, before);
      // Publish the prompt's blocks while the sequence runs: the cached tokens are [0, L) now.
      if (i === 0 && params.publishAfterPrefill) target.cache(s);
    }
    running.push(s);
    if (onProgress && r % progressEvery === 0) onProgress(r, total);
  }
  while (live() > 0) finishOldest();
  const seconds = (performance.now() - t0) / 1000;
  onProgress?.(total, total);
  return {
    requests: total,
    rejected,
    truncated,
    promptBlocks,
    matchedBlocks,
    hitRate: promptBlocks === 0 ? 0 : Math.round((matchedBlocks / promptBlocks) * 1e6) / 1e6,
    evictedBlocks: target.blocksEvicted() - evictedBefore,
    allocatedBlocks,
    idChecksum,
    freeBlocksAtEnd: target.numFreeBlocks(),
    cachedBlocksAtEnd: target.numBlocksInPrefixCache(),
    seconds,
    allocateCallsPerSecond: seconds > 0 ? Math.round(allocateCalls / seconds) : 0,
    ...target.extraResult?.(),
  };
}
