// Model of Sequence: plain arrays.

export class ModelSequence {
  tokens: number[];
  readonly numPromptTokens: number;
  kvCachedTokens = 0;
  blockTable: number[] = [];
  sharedBlocks = 0;
  dpRank = -1;
  singleBlockId = -1;
  needsSwap = false;
  linearSlot = -1;
  /** Cache salt ("" = none). */
  readonly salt: string;

  constructor(prompt: ArrayLike<number>, salt = '') {
    this.tokens = Array.from(prompt);
    this.salt = salt;
    this.numPromptTokens = this.tokens.length;
  }

  get numTokens(): number {
    return this.tokens.length;
  }

  get numBlocks(): number {
    return this.blockTable.length;
  }

  blockAt(i: number): number {
    return this.blockTable[i]!;
  }

  appendToken(t: number): void {
    this.tokens.push(t);
  }

  reset(): void {
    this.blockTable = [];
    this.sharedBlocks = 0;
    this.kvCachedTokens = 0;
    this.needsSwap = false;
  }
}
