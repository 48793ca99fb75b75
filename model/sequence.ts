// Model of Sequence and of what the pool and its ranks know of it
// (bindings/pool/sequence.ts, bindings/ranks/sequence-state.ts): plain arrays.

import type { ModelRetention } from './prefix-cache.js';
import { modelInt, modelInt32s } from './validate.js';

/** A block copy between tiers; `key` is the block's chain key. */
export interface ModelTransfer {
  src: number;
  dst: number;
  key: string;
}

/** A sequence's blocks in the host tier. */
export interface ModelHostBlocks {
  /** Host ids in logical order. */
  table: number[];
  /** Prompt tokens whose KV the host holds (a multiple of the block size). */
  kv: number;
  /** Blocks a prefetch from the KV-cache store is filling, or null. */
  prefetch: ModelTransfer[] | null;
}

export class ModelSequence {
  tokens: number[];
  numPromptTokens: number;
  private kv = 0;
  blockTable: number[] = [];
  sharedBlocks = 0;
  dpRank = -1;
  singleBlockId = -1;
  needsSwap = false;
  /** Linear state: the live slot (-1 when none) and whether it holds this sequence's state. */
  linearSlot = -1;
  linearInit = false;
  /** Cache salt ("" = none). */
  salt: string;
  /** Token ranges with eviction priorities (the 'priority' policy), [] for none. */
  retention: ModelRetention[] = [];
  /** The pool that placed it (a sequence is used with one pool only). */
  owner: object | null = null;
  /** Composite ranks: one table per sub-manager (-1 where a window slid out), null until allocated. */
  tables: number[][] | null = null;
  /** Host tier: its host blocks, or null. */
  host: ModelHostBlocks | null = null;
  /** Beam search: the source beam's blocks (one reference each) its next allocation takes, or null. */
  beamSource: { table: number[]; shared: number } | null = null;

  constructor(prompt: ArrayLike<number>, salt = '') {
    this.tokens = modelInt32s('prompt', prompt);
    this.salt = salt;
    this.numPromptTokens = this.tokens.length;
  }

  /** Tokens whose KV is computed: 0..numTokens. */
  get kvCachedTokens(): number {
    return this.kv;
  }

  set kvCachedTokens(n: number) {
    this.kv = modelInt('kvCachedTokens', n, 0, this.tokens.length);
  }

  get numTokens(): number {
    return this.tokens.length;
  }

  get numBlocks(): number {
    return this.blockTable.length;
  }

  blockAt(i: number): number {
    return this.blockTable[modelInt('i', i, 0, this.blockTable.length - 1)]!;
  }

  appendToken(t: number): void {
    this.tokens.push(modelInt('token', t, -0x80000000, 0x7fffffff));
  }

  /** Forgets every block and the computed count (the rank released them). */
  reset(): void {
    this.blockTable = [];
    this.sharedBlocks = 0;
    this.kv = 0;
    this.needsSwap = false;
  }

  // The linear-state batch flow's view of the sequence (ModelLinearSeq).
  get slot(): number {
    return this.linearSlot;
  }

  set slot(s: number) {
    this.linearSlot = s;
  }

  get kvCached(): number {
    return this.kv;
  }

  get promptTokens(): number {
    return this.numPromptTokens;
  }

  get initialized(): boolean {
    return this.linearInit;
  }

  set initialized(on: boolean) {
    this.linearInit = on;
  }
}
