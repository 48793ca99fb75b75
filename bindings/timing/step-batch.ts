// One engine step as a timing model sees it (docs/timing.md, the batch):
// every prefill chunk with the context before it, every decode with its
// context, the data-parallel rank of each, host loads; and the interface a
// timing model implements.

import { describe } from '../validate.js';

/** One engine step's batch, as a timing model sees it. */
export interface StepBatch {
  /** Prompt tokens computed this step (after prefix-cache and host-tier hits), every chunk summed. */
  prefillTokens: number;
  /** Prompt tokens skipped this step because a cache held them (not computed; a chunk's attention still reads them: chunkContextTokens). */
  cachedTokens: number;
  /** Sequences with a prefill chunk this step. */
  prefillSeqs: number;
  /** Sequences decoding one token this step. */
  decodeSeqs: number;
  /** Sum of the decoding sequences' context lengths (tokens in their KV cache). */
  decodeContextTokens: number;
  /** Blocks loaded from the host tier this step. */
  hostLoadedBlocks: number;
  /**
   * Per prefill chunk, in the step's order (exactly `prefillSeqs` entries):
   * the tokens the chunk computes. They sum to `prefillTokens`.
   */
  chunkTokens: number[];
  /**
   * Per prefill chunk: the tokens of its sequence already in the KV cache
   * before the chunk (prefix-cache and host hits, earlier chunks), which its
   * attention reads.
   */
  chunkContextTokens: number[];
  /**
   * Per decoding sequence (exactly `decodeSeqs` entries): its context length,
   * the tokens in its KV cache with this step's input token. They sum to
   * `decodeContextTokens`.
   */
  decodeContexts: number[];
  /** The data-parallel rank each chunk runs on (all 0 on a one-rank engine). */
  chunkRanks: number[];
  /** The data-parallel rank each decode runs on. */
  decodeRanks: number[];
  /** The engine's data-parallel ranks, which step in lockstep (1: one rank). */
  dpRanks: number;
}

/** An empty batch: nothing computed, one rank. */
export function emptyStepBatch(): StepBatch {
  return {
    prefillTokens: 0, cachedTokens: 0, prefillSeqs: 0, decodeSeqs: 0, decodeContextTokens: 0, hostLoadedBlocks: 0,
    chunkTokens: [], chunkContextTokens: [], decodeContexts: [], chunkRanks: [], decodeRanks: [], dpRanks: 1,
  };
}

/** Empties an array in place, keeping its storage (setting `length = 0` drops it, and the next push allocates anew: ~10 % of a timed fleet). */
function empty(a: number[]): void {
  while (a.length > 0) a.pop();
}

/** Empties `b` in place for the next step (its arrays keep their storage; `dpRanks` stays). */
export function clearStepBatch(b: StepBatch): void {
  b.prefillTokens = 0;
  b.cachedTokens = 0;
  b.prefillSeqs = 0;
  b.decodeSeqs = 0;
  b.decodeContextTokens = 0;
  b.hostLoadedBlocks = 0;
  empty(b.chunkTokens);
  empty(b.chunkContextTokens);
  empty(b.decodeContexts);
  empty(b.chunkRanks);
  empty(b.decodeRanks);
}

/** Adds a prefill chunk of `tokens` after `context` tokens of its sequence, on dp rank `rank`. */
export function addChunk(b: StepBatch, tokens: number, context: number, rank = 0): void {
  b.prefillTokens += tokens;
  b.prefillSeqs++;
  b.chunkTokens.push(tokens);
  b.chunkContextTokens.push(context);
  b.chunkRanks.push(rank);
}

/** Adds a decode whose context (with this step's token) is `context` tokens, on dp rank `rank`. */
export function addDecode(b: StepBatch, context: number, rank = 0): void {
  b.decodeSeqs++;
  b.decodeContextTokens += context;
  b.decodeContexts.push(context);
  b.decodeRanks.push(rank);
}

export interface TimingModel {
  readonly name: string;
  /** Milliseconds the step takes (finite, >= 0). Must not keep or change `batch`. */
  stepMs(batch: Readonly<StepBatch>): number;
  /** The KV bytes behind a block, when the model knows them (a fleet's kvCacheGib needs them). */
  readonly kv?: KvFacts;
}

/** What a model knows of the memory of a dp rank's GPUs (docs/timing.md, KV capacity). */
export interface KvFacts {
  /** Bytes of one token's K and V on one GPU of a dp rank (its share under TP). */
  readonly bytesPerToken: number;
  /** GPUs per dp rank (the TP degree). */
  readonly gpusPerRank: number;
  /** One GPU's memory, bytes, when the model knows its GPU. */
  readonly gpuBytes?: number;
  /** Bytes of weights on one GPU of an engine of `dpRanks` ranks, when the model knows its weights. */
  weightBytes?(dpRanks: number): number;
}

/**
 * Refuses a batch whose lists disagree with its counts (a batch built from
 * sums alone, without addChunk and addDecode, cannot be timed per
 * sequence). O(1): the ranks are checked by the models that use them.
 */
export function checkBatch(b: Readonly<StepBatch>): void {
  const D = b.dpRanks;
  if (!Number.isInteger(D) || D < 1) throw new RangeError(`batch.dpRanks must be an integer >= 1, got ${describe(D)}`);
  if (b.chunkTokens.length !== b.prefillSeqs || b.chunkContextTokens.length !== b.prefillSeqs || b.chunkRanks.length !== b.prefillSeqs) {
    throw new RangeError(`batch: prefillSeqs is ${b.prefillSeqs} but chunkTokens, chunkContextTokens and chunkRanks have ${b.chunkTokens.length}, ${b.chunkContextTokens.length} and ${b.chunkRanks.length} entries (build a batch with addChunk and addDecode)`);
  }
  if (b.decodeContexts.length !== b.decodeSeqs || b.decodeRanks.length !== b.decodeSeqs) {
    throw new RangeError(`batch: decodeSeqs is ${b.decodeSeqs} but decodeContexts and decodeRanks have ${b.decodeContexts.length} and ${b.decodeRanks.length} entries (build a batch with addChunk and addDecode)`);
  }
}

/** Refuses a batch that names a rank outside its dp ranks. */
export function checkRanks(b: Readonly<StepBatch>): void {
  const D = b.dpRanks;
  for (let i = 0; i < b.prefillSeqs; i++) {
    const r = b.chunkRanks[i]!;
    if (!(r >= 0 && r < D && Number.isInteger(r))) throw new RangeError(`batch.chunkRanks[${i}] must be a rank in [0, ${D - 1}], got ${describe(r)}`);
  }
  for (let i = 0; i < b.decodeSeqs; i++) {
    const r = b.decodeRanks[i]!;
    if (!(r >= 0 && r < D && Number.isInteger(r))) throw new RangeError(`batch.decodeRanks[${i}] must be a rank in [0, ${D - 1}], got ${describe(r)}`);
  }
}
