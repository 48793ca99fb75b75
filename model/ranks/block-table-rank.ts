// Model of a rank whose sequences hold one block table
// (bindings/ranks/block-table-rank.ts): the plain rank (a block manager,
// with or without a prefix cache) and the XTensor rank (blocks on mapped
// pages, no prefix cache). The reference's plain path: prefix match on an
// empty sequence, the exact-prompt rule, growth, beam swaps, caching and
// release in logical order.

import { ModelBlockManager, type ModelManagerStats } from '../block-manager-impl.js';
import type { ModelSequence } from '../sequence.js';
import type { ModelXTensor } from '../xtensor-block-manager-impl.js';
import type { ModelLinearStateAddOn } from './linear-state-add-on.js';
import { modelPrefixKeys } from './prefix-keys.js';
import type { ModelRankManager, ModelSwap } from './rank-manager.js';

export class ModelBlockTableRank implements ModelRankManager {
  readonly prefixCache: boolean;
  readonly transfers: ModelSwap[] = [];

  constructor(
    readonly kind: 'plain' | 'xtensor',
    readonly kv: ModelBlockManager | ModelXTensor,
    readonly blockSize: number,
    readonly linear: ModelLinearStateAddOn | null,
  ) {
    this.prefixCache = kv instanceof ModelBlockManager && kv.prefixOn;
  }

  /** The prefix-cache manager (only called when the rank has a prefix cache). */
  get cacheManager(): ModelBlockManager {
    return this.kv as ModelBlockManager;
  }

  precheck(): void {}

  allocate(s: ModelSequence, numTokens: number): boolean {
    if (s.beamSource !== null) this.takeBeam(s);
    const startedEmpty = s.blockTable.length === 0;
    if (startedEmpty && this.prefixCache) this.attachShared(s);
    const need = Math.ceil(numTokens / this.blockSize);
    const held = s.blockTable.length;
    if (need <= held) return !s.needsSwap || this.swapLastBlock(s);
    const fresh = this.kv.allocate(need - held);
    if (fresh === null) {
      if (startedEmpty) this.releaseBlocks(s);
      return false;
    }
    // Growth fills the block a swap would have copied: no swap when growing.
    s.needsSwap = false;
    s.blockTable.push(...fresh);
    return true;
  }

  tryAllocate(s: ModelSequence): boolean {
    const B = this.blockSize;
    const before = { table: [...s.blockTable], shared: s.sharedBlocks };
    // Continue the match only from a purely shared prefix.
    if (this.prefixCache && s.blockTable.length === s.sharedBlocks && Math.floor(s.numTokens / B) > s.blockTable.length) {
      const existed = s.blockTable.length;
      const hits = this.cacheManager.allocateShared(s.tokens, s.blockTable, s.salt);
      const table = [...s.blockTable, ...hits];
      const kept = this.keepForLinearState(s, table, existed);
      s.sharedBlocks += kept - existed;
      s.blockTable = table.slice(0, kept);
    }
    const need = Math.ceil(s.numTokens / B) - s.blockTable.length;
    if (need > 0) {
      const fresh = this.kv.allocate(need);
      if (fresh === null) {
        this.kv.deallocate(s.blockTable.slice(before.table.length));
        s.blockTable = before.table;
        s.sharedBlocks = before.shared;
        return false;
      }
      s.blockTable.push(...fresh);
    }
    s.kvCachedTokens = s.numTokens;
    return true;
  }

  allocateShared(s: ModelSequence): void {
    if (s.blockTable.length === 0 && this.prefixCache) this.attachShared(s);
  }

  /** Attaches the prompt's prefix hits; an exact prompt hit gives its last block back so a token is computed. */
  private attachShared(s: ModelSequence): void {
    const B = this.blockSize;
    const table = this.cacheManager.allocateShared(s.tokens, [], s.salt);
    let hits = this.keepForLinearState(s, table, 0);
    if (hits === 0) return;
    if (hits * B === s.numTokens) {
      this.kv.deallocate([table[hits - 1]!]);
      hits--;
    }
    s.blockTable = table.slice(0, hits);
    s.sharedBlocks = hits;
    s.kvCachedTokens = hits * B;
  }

  /** With linear state, matched entries [existed, table.length) are cut back to a checkpointed boundary; returns the entries kept. */
  private keepForLinearState(s: ModelSequence, table: number[], existed: number): number {
    if (this.linear === null || !this.prefixCache) return table.length;
    const keep = this.linear.keep(this.cacheManager, table, s.numTokens, existed, table.length);
    if (keep < table.length) this.kv.deallocate(table.slice(keep));
    return keep;
  }

  /** Beam search: the fork gets its own copy of the shared last block. */
  private swapLastBlock(s: ModelSequence): boolean {
    const fresh = this.kv.allocate(1);
    if (fresh === null) return false;
    const last = s.blockTable.length - 1;
    const src = s.blockTable[last]!;
    s.blockTable[last] = fresh[0]!;
    this.kv.deallocate([src]);
    s.sharedBlocks = Math.min(s.sharedBlocks, last);
    s.needsSwap = false;
    this.transfers.push({ src, dst: fresh[0]! });
    return true;
  }

  /** Drops the sequence's references in ascending logical order and forgets its blocks and computed count. */
  releaseBlocks(s: ModelSequence): void {
    this.kv.deallocate(s.blockTable);
    s.reset();
  }

  cache(s: ModelSequence, numTokens: number): void {
    // The tokens are the beam source's already: its blocks are the table to cache.
    if (s.beamSource !== null) this.takeBeam(s);
    if (!this.prefixCache) return;
    const n = Math.min(Math.floor(numTokens / this.blockSize), s.blockTable.length);
    if (n <= s.sharedBlocks) return;
    this.cacheManager.cache(s.tokens.slice(0, n * this.blockSize), s.blockTable.slice(0, n), s.sharedBlocks, s.salt, s.retention);
  }

  release(s: ModelSequence, cacheFirst: boolean): void {
    if (cacheFirst) this.cache(s, s.kvCachedTokens);
    this.releaseBlocks(s);
    this.dropBeam(s);
  }

  fork(parent: ModelSequence): void {
    if (parent.blockTable.length > 0) this.kv.retain(parent.blockTable);
  }

  adoptBeam(child: ModelSequence, source: ModelSequence, swap: boolean): void {
    const table = [...source.blockTable];
    if (table.length > 0) this.kv.retain(table);
    this.dropBeam(child);
    child.beamSource = { table, shared: source.sharedBlocks };
    child.needsSwap = swap && table.length > 0;
  }

  /** The reference's process_beam_search: the sequence's own blocks go, its source's take their place; its computed count stays. */
  private takeBeam(s: ModelSequence): void {
    const b = s.beamSource!;
    const swap = s.needsSwap;
    const kv = s.kvCachedTokens;
    this.releaseBlocks(s);
    s.beamSource = null;
    s.blockTable = b.table;
    s.sharedBlocks = b.shared;
    s.needsSwap = swap;
    s.kvCachedTokens = kv;
  }

  /** Lets go of a pending beam source (a newer one replaces it, or the sequence finishes). */
  private dropBeam(s: ModelSequence): void {
    const b = s.beamSource;
    if (b === null) return;
    s.beamSource = null;
    this.kv.deallocate(b.table);
  }

  holds(s: ModelSequence): boolean {
    return s.blockTable.length > 0 || s.beamSource !== null;
  }

  prefixKeys(s: ModelSequence, n: number): string[] {
    return modelPrefixKeys(this.kv instanceof ModelBlockManager ? this.kv : null, s, n, this.blockSize);
  }

  numFreeBlocks(): number {
    return this.kv.numFreeBlocks();
  }

  numUsedBlocks(): number {
    return this.kv.numUsedBlocks();
  }

  numBlocksInPrefixCache(): number {
    return this.kv instanceof ModelBlockManager ? this.kv.numBlocksInPrefixCache() : 0;
  }

  kvCacheUtilization(): number {
    return this.kv.kvCacheUtilization();
  }

  stats(): ModelManagerStats {
    return this.kv.stats();
  }

  recordEvents(on: boolean): void {
    if (this.kv instanceof ModelBlockManager) this.kv.recordEvents(on);
  }

  resetPrefixCache(): number {
    return this.kv instanceof ModelBlockManager ? this.kv.resetPrefixCache() : 0;
  }

  time(): number {
    return this.kv instanceof ModelBlockManager ? this.kv.prefix.now : 0;
  }

  setTime(t: number): void {
    if (this.kv instanceof ModelBlockManager) this.kv.setTime(t);
  }

  trackPeaks(): void {
    if (this.kv instanceof ModelBlockManager) this.kv.trackPeak = true;
  }
}
