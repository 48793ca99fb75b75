// A rank whose sequences hold one block table in one KV manager: the plain
// rank (a core-backed BlockManagerImpl, or its concurrent form in shared
// memory) and the XTensor rank (blocks on mapped pages, no prefix cache).
// This is the reference's plain path: prefix match on an empty sequence, the
// exact-prompt rule, growth, beam swaps, caching and release in logical order.

import { BlockManagerImpl } from '../managers/block-manager-impl.js';
import type { BlockManagerStats } from '../managers/block-manager.js';
import { CoreManager } from '../managers/core-manager.js';
import { GPU_SOURCE, type KVEventRecordVisitor, type RecordEventsOptions } from '../managers/kv-events.js';
import type { PoolManager } from '../managers/pool-manager.js';
import { plainCore } from '../core/plain-core.js';
import { hashChainFromTokens, hashChainIn, hashChainOf } from './prefix-hashes.js';
import type { LinearStateAddOn } from './linear-state-add-on.js';
import type { BlockTransferInfo, RankKind, RankManager } from './rank-manager.js';
import type { CoreBytes } from '../core/core-instance.js';
import type { SequenceState } from './sequence-state.js';

export class BlockTableRank implements RankManager {
  readonly blockSize: number;
  readonly prefixCache: boolean;
  readonly transfers: BlockTransferInfo[] = [];
  private readonly scratch = new Int32Array(1);

  constructor(
    readonly kind: RankKind,
    readonly kv: PoolManager,
    readonly linear: LinearStateAddOn | null,
    /** The pool's hash seed: checkpoint keys of a rank without a core-backed manager are hashed with it. */
    private readonly seed: { lo: number; hi: number },
  ) {
    this.blockSize = kv.blockSize;
    this.prefixCache = kv instanceof BlockManagerImpl && kv.enablePrefixCache;
  }

  enter(): void {}

  exit(): void {}

  precheck(): void {}

  fits(s: SequenceState, numTokens: number): boolean {
    const held = s.numBlocks;
    return held > 0 && numTokens <= held * this.blockSize && !s.needSwap && s.beamSource === null;
  }

  allocate(s: SequenceState, numTokens: number): boolean {
    if (s.beamSource !== null) this.takeBeam(s);
    const startedEmpty = s.numBlocks === 0;
    if (startedEmpty && this.prefixCache) this.attachShared(s);
    const need = Math.ceil(numTokens / this.blockSize);
    const held = s.numBlocks;
    if (need <= held) return !s.needSwap || this.swapLastBlock(s);
    s.reserveBlocks(need - held);
    if (!this.kv.allocateInto(need - held, s.table, held)) {
      if (startedEmpty) this.releaseBlocks(s);
      return false;
    }
    // The block a swap would have copied is full now; growth makes it moot (no swap when growing).
    s.needSwap = false;
    s.numBlocks = need;
    if (startedEmpty && this.linear !== null && this.prefixCache) this.stampPrompt(s);
    return true;
  }

  /**
   * With linear state, a prefill stamps the hashes of its full blocks on
   * them: the checkpoints of its batch are keyed by these very hashes
   * (prefixHashes then copies them), and cache() takes them as they are,
   * so the prompt is hashed once instead of twice. (Without linear state
   * nothing needs them before cache(); stamping early measured ~117 more
   * core instructions per block for the same hashes.)
   */
  private stampPrompt(s: SequenceState): void {
    const from = s.hashed;
    const to = Math.min(Math.floor(s.numTokens / this.blockSize), s.numBlocks);
    if (to <= from) return;
    const parent = from > 0 ? s.table[from - 1]! : 0;
    const code = (this.kv as BlockManagerImpl).stampChainFrom(s.tokens, s.table, from, to - from, parent, s.saltKey);
    if (code < 0) throw new Error(`kvpool: internal error stamping a prompt's hashes (core code ${code})`);
    s.hashed = to;
  }

  /**
   * @internal `k` allocate() calls in a row that each need one block more
   * than the sequence holds (decode steps whose count passes a multiple of
   * the block size), made as one core call; stops at the first that fails,
   * as the calls would. Only for a sequence holding blocks, owing no swap
   * and adopting no beam, without linear state; -1 otherwise (and when the
   * manager makes them one at a time). Returns the blocks added.
   */
  growSteps(s: SequenceState, k: number): number {
    if (s.numBlocks === 0 || s.needSwap || s.beamSource !== null || this.linear !== null) return -1;
    if (!(this.kv instanceof BlockManagerImpl)) return -1;
    s.reserveBlocks(k);
    const got = this.kv.allocateStepsInto(k, s.table, s.numBlocks);
    if (got > 0) s.numBlocks += got;
    return got;
  }

  tryAllocate(s: SequenceState): boolean {
    const B = this.blockSize;
    const heldBefore = s.numBlocks;
    const sharedBefore = s.shared;
    // Continue the match only from a purely shared prefix (the reference
    // appends already-held blocks a second time here; we do not).
    if (this.prefixCache && heldBefore === sharedBefore) {
      const nFull = Math.floor(s.numTokens / B);
      if (nFull > heldBefore) {
        s.reserveBlocks(nFull - heldBefore);
        const parent = heldBefore > 0 ? s.table[heldBefore - 1]! : 0;
        let hits = this.kv.matchInto(s.tokens, heldBefore, nFull - heldBefore, parent, s.table, heldBefore, s.saltKey);
        hits = this.keepForLinearState(s, heldBefore, heldBefore + hits) - heldBefore;
        s.numBlocks += hits;
        s.shared += hits;
      }
    }
    const need = Math.ceil(s.numTokens / B) - s.numBlocks;
    if (need > 0) {
      s.reserveBlocks(need);
      if (!this.kv.allocateInto(need, s.table, s.numBlocks)) {
        this.kv.releaseFrom(s.table, heldBefore, s.numBlocks);
        s.numBlocks = heldBefore;
        s.unstampFrom(heldBefore);
        s.shared = sharedBefore;
        return false;
      }
      s.numBlocks += need;
    }
    s.kvCached = s.numTokens;
    return true;
  }

  allocateShared(s: SequenceState): void {
    if (s.numBlocks === 0 && this.prefixCache) this.attachShared(s);
  }

  /**
   * Matches the full blocks of the prompt and attaches the hits. An exact
   * prompt hit gives its last block back so at least one token is computed.
   */
  private attachShared(s: SequenceState): void {
    const B = this.blockSize;
    const nFull = Math.floor(s.numTokens / B);
    if (nFull === 0) return;
    s.reserveBlocks(nFull);
    let hits = this.kv.matchInto(s.tokens, 0, nFull, 0, s.table, 0, s.saltKey);
    hits = this.keepForLinearState(s, 0, hits);
    if (hits === 0) return;
    if (hits * B === s.numTokens) {
      this.kv.releaseFrom(s.table, hits - 1, hits);
      hits--;
    }
    s.numBlocks = hits;
    s.shared = hits;
    s.hashed = hits;
    s.kvCached = hits * B;
  }

  /** With linear state, matched blocks [existed, total) of the table are cut back to a checkpointed boundary. */
  private keepForLinearState(s: SequenceState, existed: number, total: number): number {
    if (this.linear === null || !(this.kv instanceof CoreManager)) return total;
    const keep = this.linear.keep(this.kv, s.table, s.numTokens, existed, total);
    if (keep < total) {
      const code = this.kv.releaseFrom(s.table, keep, total);
      if (code < 0) throw new Error(`kvpool: internal error trimming shared blocks (core code ${code})`);
    }
    return keep;
  }

  /** Beam search: the fork gets its own copy of the shared last block. */
  private swapLastBlock(s: SequenceState): boolean {
    if (!this.kv.allocateInto(1, this.scratch, 0)) return false;
    const last = s.numBlocks - 1;
    const src = s.table[last]!;
    const dst = this.scratch[0]!;
    s.table[last] = dst;
    s.unstampFrom(last);
    this.releaseId(src);
    if (s.shared > last) s.shared = last;
    s.needSwap = false;
    this.transfers.push({ src, dst });
    return true;
  }

  /** Drops one reference on one id the rank itself took. */
  private releaseId(id: number): void {
    this.scratch[0] = id;
    const code = this.kv.releaseFrom(this.scratch, 0, 1);
    if (code < 0) throw new Error(`kvpool: internal error releasing block ${id} (core code ${code})`);
  }

  /** Drops the sequence's references on its blocks in ascending logical order. */
  releaseBlocks(s: SequenceState): void {
    const code = this.kv.releaseFrom(s.table, 0, s.numBlocks);
    if (code < 0) throw new Error(`kvpool: internal error releasing a sequence's blocks (core code ${code})`);
    s.resetBlocks();
  }

  cache(s: SequenceState, numTokens: number): void {
    // The tokens are the beam source's already: its blocks must be the table that is cached.
    if (s.beamSource !== null) this.takeBeam(s);
    if (!this.prefixCache) return;
    const n = Math.min(Math.floor(numTokens / this.blockSize), s.numBlocks);
    const first = s.shared;
    if (n <= first) return;
    const parent = first > 0 ? s.table[first - 1]! : 0;
    const kv = this.kv as BlockManagerImpl;
    // Stamps are trusted only below a block a sibling may have keyed with its own tokens.
    const trusted = s.forkSharedFrom < 0 ? n : Math.min(n, s.forkSharedFrom);
    const known = Math.max(0, Math.min(s.hashed, trusted) - first);
    const r =
      s.retention !== null
        ? kv.insertWithRetention(s.retention, s.tokens, s.table, first, n - first, parent, s.saltKey)
        : kv.insertFrom(s.tokens, s.table, first, n - first, parent, s.saltKey, known);
    if (r < 0) throw new Error(`kvpool: internal error caching a sequence (core code ${r})`);
    if (s.hashed < trusted) s.hashed = trusted;
  }

  release(s: SequenceState, cacheFirst: boolean): void {
    if (cacheFirst) this.cache(s, s.kvCached);
    this.releaseBlocks(s);
    this.dropBeam(s);
  }

  fork(parent: SequenceState, child: SequenceState): void {
    this.retain(parent.table, parent.numBlocks);
    // From the first block not full of their common tokens, both may write.
    const from = Math.floor(parent.numTokens / this.blockSize);
    parent.shareWritableFrom(from);
    child.shareWritableFrom(from);
  }

  private retain(ids: Int32Array, n: number): void {
    if (n === 0) return;
    const code = this.kv.retainFrom(ids, 0, n);
    if (code < 0) throw new Error(`kvpool: internal error sharing a sequence's blocks (core code ${code})`);
  }

  adoptBeam(child: SequenceState, source: SequenceState, swap: boolean): void {
    const n = source.numBlocks;
    this.retain(source.table, n);
    this.dropBeam(child);
    // As for a fork: source and child may both write from the first block not full of their tokens.
    const from = Math.floor(source.numTokens / this.blockSize);
    source.shareWritableFrom(from);
    const sharedFrom = from < n ? (source.forkSharedFrom < 0 ? from : Math.min(from, source.forkSharedFrom)) : source.forkSharedFrom;
    child.beamSource = { table: source.table.slice(0, n), shared: source.shared, hashed: source.hashed, forkSharedFrom: sharedFrom };
    child.needSwap = swap && n > 0;
  }

  /** The reference's process_beam_search: the sequence's own blocks go, its source's take their place; its computed count stays. */
  private takeBeam(s: SequenceState): void {
    const b = s.beamSource!;
    const swap = s.needSwap;
    const kvCached = s.kvCached;
    this.releaseBlocks(s);
    s.kvCached = kvCached;
    s.beamSource = null;
    s.reserveBlocks(b.table.length);
    s.table.set(b.table);
    s.numBlocks = b.table.length;
    s.shared = b.shared;
    s.hashed = b.hashed;
    s.forkSharedFrom = b.forkSharedFrom;
    s.needSwap = swap;
  }

  /** Lets go of a pending beam source (a newer one replaces it, or the sequence finishes). */
  private dropBeam(s: SequenceState): void {
    const b = s.beamSource;
    if (b === null) return;
    s.beamSource = null;
    const code = this.kv.releaseFrom(b.table, 0, b.table.length);
    if (code < 0) throw new Error(`kvpool: internal error releasing a beam source (core code ${code})`);
  }

  holds(s: SequenceState): boolean {
    return s.numBlocks > 0 || s.beamSource !== null;
  }

  prefixHashes(s: SequenceState, nBlocks: number): Uint8Array {
    if (this.kv instanceof CoreManager) {
      // A pending beam: the tokens are the source's already, and so are the blocks that will hold them.
      const b = s.beamSource;
      const view = b === null ? s : Object.assign(Object.create(s) as SequenceState, { table: b.table, numBlocks: b.table.length, hashed: b.hashed });
      return hashChainOf(this.kv, view, nBlocks);
    }
    return hashChainFromTokens(plainCore(), s, nBlocks, this.blockSize, this.seed.lo, this.seed.hi);
  }

  prefixHashesIn(s: SequenceState, nBlocks: number, extra: number): CoreBytes | null {
    if (!(this.kv instanceof CoreManager) || s.beamSource !== null) return null;
    return { rt: this.kv.rt, at: hashChainIn(this.kv, s, nBlocks, extra) };
  }

  numFreeBlocks(): number {
    return this.kv.numFreeBlocks();
  }

  numUsedBlocks(): number {
    return this.kv.numUsedBlocks();
  }

  numBlocksInPrefixCache(): number {
    return this.kv.numBlocksInPrefixCache();
  }

  kvCacheUtilization(): number {
    return this.kv.kvCacheUtilization();
  }

  stats(): BlockManagerStats {
    return this.kv.stats();
  }

  recordEvents(on: boolean, options?: RecordEventsOptions): void {
    this.kv.recordEvents(on, options);
  }

  drainEventRecords(visit: KVEventRecordVisitor): void {
    this.kv.drainEventRecords(GPU_SOURCE, visit);
  }

  snapshotEventRecords(visit: KVEventRecordVisitor): void {
    this.kv.snapshotEventRecords(GPU_SOURCE, visit);
  }

  resetPrefixCache(): number {
    return this.kv.resetPrefixCache();
  }

  time(): number {
    return this.kv instanceof BlockManagerImpl ? this.kv.time : 0;
  }

  setTime(t: number): void {
    if (this.kv instanceof BlockManagerImpl) this.kv.setTime(t);
  }

  /** The holders of every id the placed sequences account for (index = id). */
  holdersOf(placed: readonly SequenceState[]): Int32Array {
    const counts = new Int32Array(this.kv.numBlocks);
    for (const s of placed) {
      if (s.shared > s.numBlocks) throw new Error('kvpool: a sequence has more shared blocks than blocks');
      for (let i = 0; i < s.numBlocks; i++) counts[s.table[i]!]!++;
      if (s.beamSource !== null) for (const id of s.beamSource.table) counts[id]!++;
    }
    return counts;
  }

  check(placed: readonly SequenceState[], rank: number, extra: Int32Array, more?: (counts: Int32Array) => void): void {
    this.kv.check();
    const counts = this.holdersOf(placed);
    for (let id = 0; id < counts.length; id++) counts[id]! += extra[id]!;
    more?.(counts);
    compareHolders(`rank ${rank} KV`, this.kv.holderCounts(), counts);
  }

  dispose(): void {
    this.kv.dispose();
    this.linear?.dispose();
  }
}

/** Throws unless every id's holders (besides the prefix cache) are the ones counted. */
export function compareHolders(what: string, actual: Int32Array, expected: Int32Array): void {
  for (let id = 1; id < actual.length; id++) {
    if (actual[id] !== expected[id]) {
      throw new Error(`kvpool: ${what} block ${id} has ${actual[id]} holders but live sequences hold it ${expected[id]} times`);
    }
  }
}
