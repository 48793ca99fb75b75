// Model of BlockManagerPool over the model managers. Mirrors
// bindings/pool/block-manager-pool.ts rule by rule, written for clarity.

import { ModelBlockManager } from './block-manager-impl.js';
import { chainKey } from './chain-key.js';
import { ModelLinearStateCache } from './linear-state-prefix-cache.js';
import { ModelSequence } from './sequence.js';
import { ModelSingleBlockManager } from './single-block-manager.js';
import type { ModelEvictionPolicy } from './prefix-cache.js';

export interface ModelPoolOptions {
  numBlocks: number;
  blockSize: number;
  dpSize?: number;
  enablePrefixCache?: boolean;
  singleBlockCapacity?: number;
  enableLinearState?: boolean;
  linearStateNumSlots?: number;
  linearStateReuse?: 'furthest' | 'contiguous';
  evictionPolicy?: ModelEvictionPolicy;
}

export class ModelBlockManagerPool {
  readonly blockSize: number;
  readonly dpSize: number;
  readonly prefixOn: boolean;
  readonly managers: ModelBlockManager[] = [];
  readonly singles: ModelSingleBlockManager[] = [];
  readonly swaps: Array<Array<{ src: number; dst: number }>> = [];
  /** One linear-state cache per rank when linear state is on, else empty. */
  readonly linear: ModelLinearStateCache[] = [];
  readonly contiguous: boolean;

  constructor(o: ModelPoolOptions) {
    this.blockSize = o.blockSize;
    this.dpSize = o.dpSize ?? 1;
    this.prefixOn = o.enablePrefixCache ?? true;
    for (let r = 0; r < this.dpSize; r++) {
      this.managers.push(
        new ModelBlockManager({ numBlocks: o.numBlocks, blockSize: o.blockSize, enablePrefixCache: this.prefixOn, evictionPolicy: o.evictionPolicy }),
      );
      this.singles.push(new ModelSingleBlockManager(o.singleBlockCapacity ?? 202));
      this.swaps.push([]);
      if (o.enableLinearState) this.linear.push(new ModelLinearStateCache(o.linearStateNumSlots ?? 202));
    }
    this.contiguous = o.linearStateReuse === 'contiguous';
  }

  /** The chain key at boundary k (after block k-1) of the sequence's tokens. */
  boundaryKeys(s: ModelSequence, n: number): string[] {
    const keys: string[] = [];
    let parent: string | null = null;
    for (let b = 0; b < n; b++) keys.push((parent = chainKey(parent, s.tokens, b * this.blockSize, (b + 1) * this.blockSize)));
    return keys;
  }

  /** The trim of docs/linear-state.md (which prefix hits are kept) on `table` (blocks [existed, table.length) just matched); returns the blocks kept. */
  private trim(s: ModelSequence, r: number, table: number[], existed: number): number[] {
    if (this.linear.length === 0 || table.length === 0) return table;
    const total = table.length;
    let safe = Math.min(existed, total);
    const cap = s.numTokens === 0 ? 0 : Math.floor((s.numTokens - 1) / this.blockSize);
    const limit = Math.max(safe, Math.min(total, cap));
    const keys = this.boundaryKeys(s, limit);
    for (let i = safe; i < limit; i++) {
      if (this.linear[r]!.contains(keys[i]!)) safe = i + 1;
      else if (this.contiguous) break;
    }
    if (safe < total) this.managers[r]!.deallocate(table.slice(safe));
    return table.slice(0, safe);
  }

  newSequence(prompt: ArrayLike<number>, salt = ''): ModelSequence {
    return new ModelSequence(prompt, salt);
  }

  private rankOf(s: ModelSequence): number {
    if (s.dpRank < 0) {
      let best = 0;
      let bestFree = 0;
      for (let r = 0; r < this.dpSize; r++) {
        if (this.linear.length > 0 && this.singles[r]!.free.length === 0) continue;
        if (this.managers[r]!.numFreeBlocks() > bestFree) {
          best = r;
          bestFree = this.managers[r]!.numFreeBlocks();
        }
      }
      s.dpRank = best;
    }
    return s.dpRank;
  }

  private attachShared(s: ModelSequence, m: ModelBlockManager): void {
    const B = this.blockSize;
    let hits = this.trim(s, this.managers.indexOf(m), m.allocateShared(s.tokens, [], s.salt), 0);
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
    if (newSingle && !this.acquireSingle(s, r)) return false;
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

  private acquireSingle(s: ModelSequence, r: number): boolean {
    const got = this.singles[r]!.allocate(1);
    if (!got) return false;
    s.singleBlockId = got[0]!;
    if (this.linear.length > 0 && s.linearSlot < 0) {
      const slot = this.linear[r]!.acquireLive();
      if (slot === null) {
        this.releaseSingle(s, r);
        return false;
      }
      s.linearSlot = slot;
    }
    return true;
  }

  private releaseSingle(s: ModelSequence, r: number): void {
    if (s.linearSlot >= 0) {
      this.linear[r]!.releaseLive(s.linearSlot);
      s.linearSlot = -1;
    }
    this.singles[r]!.deallocate([s.singleBlockId]);
    s.singleBlockId = -1;
  }

  tryAllocate(s: ModelSequence): boolean {
    const r = this.rankOf(s);
    const m = this.managers[r]!;
    const newSingle = s.singleBlockId < 0;
    if (newSingle && !this.acquireSingle(s, r)) return false;
    const before = { table: [...s.blockTable], shared: s.sharedBlocks };
    if (this.prefixOn && s.blockTable.length === s.sharedBlocks) {
      const existed = s.blockTable.length;
      const kept = this.trim(s, r, [...s.blockTable, ...m.allocateShared(s.tokens, s.blockTable, s.salt)], existed);
      s.sharedBlocks += kept.length - existed;
      s.blockTable = kept;
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
