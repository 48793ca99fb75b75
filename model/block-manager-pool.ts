// Model of BlockManagerPool over the model managers. Mirrors
// bindings/pool/block-manager-pool.ts rule by rule, written for clarity.

import { ModelBlockManager } from './block-manager-impl.js';
import { chainKey } from './chain-key.js';
import { ModelLinearStateCache } from './linear-state-prefix-cache.js';
import { ModelSequence } from './sequence.js';
import { ModelSingleBlockManager } from './single-block-manager.js';
import { modelRetentionRanges, type ModelEvictionPolicy } from './prefix-cache.js';
import { modelInt } from './validate.js';

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
  /** Per rank: shared blocks given back for lack of a checkpoint, below the cap (linear state). */
  readonly trimmedBlocks: number[];

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
    // Sequences check their tokens when made and appended to: the managers need not again.
    for (const m of this.managers) m.checkTokens = false;
    this.contiguous = o.linearStateReuse === 'contiguous';
    this.trimmedBlocks = this.managers.map(() => 0);
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
    if (safe < total) {
      this.trimmedBlocks[r]! += Math.max(0, limit - safe);
      this.managers[r]!.deallocate(table.slice(safe));
    }
    return table.slice(0, safe);
  }

  newSequence(prompt: ArrayLike<number>, salt = ''): ModelSequence {
    return new ModelSequence(prompt, salt);
  }

  /** Most free blocks, lowest rank on ties; with linear state, ranks without a free single id are skipped (rank 0 if none is left). */
  chooseRank(): number {
    let best = 0;
    let bestFree = 0;
    for (let r = 0; r < this.dpSize; r++) {
      if (this.linear.length > 0 && this.singles[r]!.free.length === 0) continue;
      if (this.managers[r]!.numFreeBlocks() > bestFree) {
        best = r;
        bestFree = this.managers[r]!.numFreeBlocks();
      }
    }
    return best;
  }

  private rankOf(s: ModelSequence): number {
    if (s.dpRank < 0) {
      s.dpRank = this.chooseRank();
      s.owner = this;
    }
    return s.dpRank;
  }

  /** A sequence placed by another pool cannot be used here (an Error, nothing changes). */
  own(s: ModelSequence): ModelSequence {
    if (!(s instanceof ModelSequence)) throw new TypeError('model: not a sequence');
    if (s.owner !== null && s.owner !== this) throw new Error('model: the sequence belongs to another pool');
    return s;
  }

  /** Allocates each sequence for all its tokens, in order, stopping at the first that fails. */
  allocateAll(list: ModelSequence[]): boolean {
    list.forEach((s) => this.own(s));
    for (const s of list) if (!this.allocateOne(s, s.numTokens)) return false;
    return true;
  }

  /** Sequence.setRetention: replaces its marks. */
  setRetention(s: ModelSequence, ranges: unknown): void {
    s.retention = modelRetentionRanges(ranges);
  }

  /** The clock of the priority policy, shared by every rank (never backwards). */
  get time(): number {
    return this.managers[0]!.prefix.now;
  }

  setTime(t: number): void {
    if (typeof t !== 'number') throw new TypeError('model: t is not a number');
    if (!(t >= this.time) || t === Infinity) throw new RangeError(`model: t ${t} is not a finite time from ${this.time} on`);
    for (const m of this.managers) m.setTime(t);
  }

  swapTransferInfos(r: number): Array<{ src: number; dst: number }> {
    return this.swaps[modelInt('dpRank', r, 0, this.dpSize - 1)]!;
  }

  /** The linear-state cache of rank `r` (a RangeError for a bad rank, then an Error without linear state). */
  linearStateCache(r: number): ModelLinearStateCache {
    modelInt('dpRank', r, 0, this.dpSize - 1);
    if (this.linear.length === 0) throw new Error('model: no linear state');
    return this.linear[r]!;
  }

  resetTransferInfos(): void {
    for (const s of this.swaps) s.length = 0;
  }

  /** Used / usable blocks of the rank a new sequence would go to. */
  kvCacheUtilization(): number {
    const m = this.managers[this.chooseRank()]!;
    return m.numUsedBlocks() / (m.numBlocks - 1);
  }

  /** Mean utilization over ranks. */
  gpuCacheUsage(): number {
    return this.managers.reduce((a, m) => a + m.numUsedBlocks() / (m.numBlocks - 1), 0) / this.dpSize;
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

  /** One sequence (for `numTokens`, all its tokens by default), or a list: see allocateAll. */
  allocate(s: ModelSequence | ModelSequence[], numTokens?: number): boolean {
    if (Array.isArray(s)) {
      if (numTokens !== undefined) throw new TypeError('model: numTokens with a list of sequences');
      return this.allocateAll(s);
    }
    return this.allocateOne(this.own(s), numTokens === undefined ? s.numTokens : modelInt('numTokens', numTokens));
  }

  protected allocateOne(s: ModelSequence, numTokens: number): boolean {
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
    this.own(s);
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
    this.own(s);
    const r = this.rankOf(s);
    if (s.blockTable.length === 0 && this.prefixOn) this.attachShared(s, this.managers[r]!);
    return s.sharedBlocks;
  }

  cache(s: ModelSequence, numTokens?: number): void {
    this.own(s);
    if (numTokens !== undefined) modelInt('numTokens', numTokens);
    const avail = numTokens === undefined ? s.kvCachedTokens : Math.min(numTokens, s.blockTable.length * this.blockSize, s.numTokens);
    this.cacheUpTo(s, avail);
  }

  private cacheUpTo(s: ModelSequence, numTokens: number): void {
    if (!this.prefixOn || s.dpRank < 0) return;
    const n = Math.min(Math.floor(numTokens / this.blockSize), s.blockTable.length);
    if (n <= s.sharedBlocks) return;
    this.managers[s.dpRank]!.cache(s.tokens.slice(0, n * this.blockSize), s.blockTable.slice(0, n), s.sharedBlocks, s.salt, s.retention);
  }

  deallocate(s: ModelSequence, cacheFirst = true): void {
    this.own(s);
    if (s.dpRank < 0) return;
    if (cacheFirst) this.cacheUpTo(s, s.kvCachedTokens);
    if (s.singleBlockId >= 0) this.releaseSingle(s, s.dpRank);
    this.managers[s.dpRank]!.deallocate(s.blockTable);
    s.reset();
  }

  fork(parent: ModelSequence, swapLastBlock: unknown = false): ModelSequence {
    this.own(parent);
    if (parent.owner === null) throw new Error('model: fork of a sequence no pool has placed');
    if (typeof swapLastBlock !== 'boolean') throw new TypeError('model: swapLastBlock is not a boolean');
    const c = new ModelSequence(parent.tokens, parent.salt);
    c.retention = parent.retention;
    c.owner = this;
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
