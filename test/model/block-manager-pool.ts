// Model of BlockManagerPool over the model managers. Mirrors
// bindings/pool/block-manager-pool.ts rule by rule, written for clarity.

import { ModelBlockManager } from './block-manager-impl.js';
import { ModelSequence } from './sequence.js';
import { ModelSingleBlockManager } from './single-block-manager.js';

export interface ModelPoolOptions {
  numBlocks: number;
  blockSize: number;
  dpSize?: number;
  enablePrefixCache?: boolean;
  singleBlockCapacity?: number;
}

export class ModelBlockManagerPool {
  readonly blockSize: number;
  readonly dpSize: number;
  readonly prefixOn: boolean;
  readonly managers: ModelBlockManager[] = [];
  readonly singles: ModelSingleBlockManager[] = [];
  readonly swaps: Array<Array<{ src: number; dst: number }>> = [];

  constructor(o: ModelPoolOptions) {
    this.blockSize = o.blockSize;
    this.dpSize = o.dpSize ?? 1;
    this.prefixOn = o.enablePrefixCache ?? true;
    for (let r = 0; r < this.dpSize; r++) {
      this.managers.push(new ModelBlockManager({ numBlocks: o.numBlocks, blockSize: o.blockSize, enablePrefixCache: this.prefixOn }));
      this.singles.push(new ModelSingleBlockManager(o.singleBlockCapacity ?? 202));
      this.swaps.push([]);
    }
  }

  newSequence(prompt: ArrayLike<number>, salt = ''): ModelSequence {
    return new ModelSequence(prompt, salt);
  }

  private rankOf(s: ModelSequence): number {
    if (s.dpRank < 0) {
      let best = 0;
      for (let r = 1; r < this.dpSize; r++) {
        if (this.managers[r]!.numFreeBlocks() > this.managers[best]!.numFreeBlocks()) best = r;
      }
      s.dpRank = best;
    }
    return s.dpRank;
  }

  private attachShared(s: ModelSequence, m: ModelBlockManager): void {
    const B = this.blockSize;
    let hits = m.allocateShared(s.tokens, [], s.salt);
    if (hits.length === 0) return;
    if (hits.length * B === s.numTokens) {
      m.deallocate([hits[hits.length - 1]!]);
      hits = hits.slice(0, -1);
    }
    s.blockTable = hits;
    s.sharedBlocks = hits.length;
    s.kvCachedTokens = hits.length * B;
  }

  allocate(s: ModelSequence, numTokens = s.numTokens): boolean {
    const r = this.rankOf(s);
    const m = this.managers[r]!;
    const startedEmpty = s.blockTable.length === 0;
    const newSingle = s.singleBlockId < 0;
    if (newSingle) {
      const got = this.singles[r]!.allocate(1);
      if (!got) return false;
      s.singleBlockId = got[0]!;
    }
    if (startedEmpty && this.prefixOn) this.attachShared(s, m);
    const need = Math.ceil(numTokens / this.blockSize);
    if (need <= s.blockTable.length) {
      if (s.needsSwap) {
        const fresh = m.allocate(1);
        if (!fresh) {
          if (newSingle) this.releaseSingle(s, r);
          return false;
        }
        const last = s.blockTable.length - 1;
        const src = s.blockTable[last]!;
        s.blockTable[last] = fresh[0]!;
        m.deallocate([src]);
        s.sharedBlocks = Math.min(s.sharedBlocks, last);
        s.needsSwap = false;
        this.swaps[r]!.push({ src, dst: fresh[0]! });
      }
      return true;
    }
    const fresh = m.allocate(need - s.blockTable.length);
    if (!fresh) {
      if (startedEmpty) {
        m.deallocate(s.blockTable);
        s.reset();
      }
      if (newSingle) this.releaseSingle(s, r);
      return false;
    }
    s.needsSwap = false;
    s.blockTable.push(...fresh);
    return true;
  }

  private releaseSingle(s: ModelSequence, r: number): void {
    this.singles[r]!.deallocate([s.singleBlockId]);
    s.singleBlockId = -1;
  }

  tryAllocate(s: ModelSequence): boolean {
    const r = this.rankOf(s);
    const m = this.managers[r]!;
    const newSingle = s.singleBlockId < 0;
    if (newSingle) {
      const got = this.singles[r]!.allocate(1);
      if (!got) return false;
      s.singleBlockId = got[0]!;
    }
    const before = { table: [...s.blockTable], shared: s.sharedBlocks };
    if (this.prefixOn && s.blockTable.length === s.sharedBlocks) {
      const hits = m.allocateShared(s.tokens, s.blockTable, s.salt);
      s.blockTable.push(...hits);
      s.sharedBlocks += hits.length;
    }
    const need = Math.ceil(s.numTokens / this.blockSize) - s.blockTable.length;
    if (need > 0) {
      const fresh = m.allocate(need);
      if (!fresh) {
        m.deallocate(s.blockTable.slice(before.table.length));
        s.blockTable = before.table;
        s.sharedBlocks = before.shared;
        if (newSingle) this.releaseSingle(s, r);
        return false;
      }
      s.blockTable.push(...fresh);
    }
    s.kvCachedTokens = s.numTokens;
    return true;
  }

  allocateShared(s: ModelSequence): number {
    const r = this.rankOf(s);
    if (s.blockTable.length === 0 && this.prefixOn) this.attachShared(s, this.managers[r]!);
    return s.sharedBlocks;
  }

  cache(s: ModelSequence, numTokens?: number): void {
    const avail = numTokens === undefined ? s.kvCachedTokens : Math.min(numTokens, s.blockTable.length * this.blockSize, s.numTokens);
    this.cacheUpTo(s, avail);
  }

  private cacheUpTo(s: ModelSequence, numTokens: number): void {
    if (!this.prefixOn || s.dpRank < 0) return;
    const n = Math.min(Math.floor(numTokens / this.blockSize), s.blockTable.length);
    if (n <= s.sharedBlocks) return;
    this.managers[s.dpRank]!.cache(s.tokens.slice(0, n * this.blockSize), s.blockTable.slice(0, n), s.sharedBlocks, s.salt);
  }

  deallocate(s: ModelSequence, cacheFirst = true): void {
    if (s.dpRank < 0) return;
    if (cacheFirst) this.cacheUpTo(s, s.kvCachedTokens);
    if (s.singleBlockId >= 0) this.releaseSingle(s, s.dpRank);
    this.managers[s.dpRank]!.deallocate(s.blockTable);
    s.reset();
  }

  fork(parent: ModelSequence, swapLastBlock = false): ModelSequence {
    const c = new ModelSequence(parent.tokens, parent.salt);
    (c as { numPromptTokens: number }).numPromptTokens = parent.numPromptTokens;
    c.blockTable = [...parent.blockTable];
    c.sharedBlocks = parent.sharedBlocks;
    c.kvCachedTokens = parent.kvCachedTokens;
    c.dpRank = parent.dpRank;
    c.needsSwap = swapLastBlock && parent.blockTable.length > 0;
    if (c.blockTable.length > 0) this.managers[parent.dpRank]!.retain(c.blockTable);
    return c;
  }

  recordEvents(on: boolean): void {
    for (const m of this.managers) m.recordEvents(on);
  }

  resetPrefixCache(): number[] {
    return this.managers.map((m) => m.resetPrefixCache());
  }

  numFreeBlocks(): number[] {
    return this.managers.map((m) => m.numFreeBlocks());
  }

  numUsedBlocks(): number[] {
    return this.managers.map((m) => m.numUsedBlocks());
  }

  numBlocksInPrefixCache(): number[] {
    return this.managers.map((m) => m.numBlocksInPrefixCache());
  }
}
