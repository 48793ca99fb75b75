// Model of Sequence: plain arrays.

import type { ModelRetention } from './prefix-cache.js';
import { modelInt, modelInt32s } from './validate.js';

export class ModelSequence {
  tokens: number[];
  readonly numPromptTokens: number;
  private kv = 0;
  blockTable: number[] = [];
  sharedBlocks = 0;
  dpRank = -1;
  singleBlockId = -1;
  needsSwap = false;
  linearSlot = -1;
  /** Cache salt ("" = none). */
  readonly salt: string;
  /** Token ranges with eviction priorities (the 'priority' policy), [] for none. */
  retention: ModelRetention[] = [];
  /** The pool that placed it (a sequence is used with one pool only). */
  owner: object | null = null;

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

  reset(): void {
    this.blockTable = [];
    this.sharedBlocks = 0;
    this.kv = 0;
    this.needsSwap = false;
  }
}
