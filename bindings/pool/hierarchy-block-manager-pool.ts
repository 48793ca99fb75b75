// HierarchyBlockManagerPool (seed 9.4, SEMANTICS A.13): a BlockManagerPool
// with a second, larger tier in host memory. Per dp rank a host
// BlockManagerImpl with its own prefix cache keeps KV that left the device,
// so a later prompt with the same prefix loads it back (H2D) instead of
// recomputing it. Finished sequences offload their freshly computed full
// blocks (D2G) to host blocks.
//
// Every block in flight is owned by a plan: an offload's device block stays
// held (and counted as used) and its host block is held by the plan until
// `completeOffload`, which caches the host block under the device block's
// hash. Load plans own nothing: their blocks are the sequence's.

import { loadCore } from '../core/plain-core.js';
import type { BlockManagerStats } from '../managers/block-manager.js';
import { BlockManagerImpl } from '../managers/block-manager-impl.js';
import { checkBool, checkInt, checkObject, describe } from '../validate.js';
import { BlockManagerPool, parsePoolOptions, type BlockManagerPoolOptions } from './block-manager-pool.js';
import { Sequence } from './sequence.js';

export interface HierarchyBlockManagerPoolOptions extends BlockManagerPoolOptions {
  /** Host blocks per dp rank, padding id 0 included (>= 2). */
  hostNumBlocks: number;
}

/** One block copy between tiers; `hash` is the block's 16-byte chain hash. */
export interface BlockTransfer {
  /** Block read (host id for a load, device id for an offload). */
  readonly src: number;
  /** Block written (device id for a load, host id for an offload). */
  readonly dst: number;
  readonly hash: Uint8Array;
}

/** Device-to-host copies of one rank, finished together by `completeOffload`. */
export interface OffloadPlan {
  readonly dpRank: number;
  /** src = device id, dst = host id, in the order they were queued. */
  readonly blocks: readonly BlockTransfer[];
}

/** What one rank's worker must copy: loads before the next step, and an offload. */
export interface RankTransfers {
  /** Host-to-device copies (src = host id, dst = device id) for the next step. */
  readonly loads: readonly BlockTransfer[];
  /** The queued device-to-host copies, or null when none are queued. */
  readonly offload: OffloadPlan | null;
}

/** Host-tier counters of one rank. */
export interface HierarchyRankStats {
  /** Prompt blocks found in the host prefix cache (after the exact-prompt rule). */
  hostHitBlocks: number;
  /** Blocks put in load plans. */
  blocksLoaded: number;
  /** Blocks queued for offload. */
  blocksOffloaded: number;
  /** Offloaded blocks whose plan was reported failed. */
  offloadBlocksFailed: number;
  /** Blocks in offload plans not completed yet (queued or taken). */
  offloadBlocksInFlight: number;
}

/** A sequence's host-tier KV state (the reference's host_kv_state). */
interface HostState {
  table: Int32Array;
  numBlocks: number;
  /** Host tokens whose KV is there (a multiple of the block size). */
  kvTokens: number;
}

function splitOptions(o: HierarchyBlockManagerPoolOptions): { base: BlockManagerPoolOptions; hostNumBlocks: number } {
  parsePoolOptions(o, ['hostNumBlocks']);
  if (o.enableXtensor) throw new RangeError('options.enableXtensor cannot be combined with a host tier (hostNumBlocks)');
  const hostNumBlocks = checkInt('options.hostNumBlocks', (o as { hostNumBlocks?: unknown }).hostNumBlocks, 2);
  const { hostNumBlocks: _h, ...base } = o;
  return { base, hostNumBlocks };
}

export class HierarchyBlockManagerPool extends BlockManagerPool {
  /** Host blocks per dp rank, padding included. */
  readonly hostNumBlocks: number;
  /** @internal one host block manager per dp rank */
  readonly hosts: BlockManagerImpl[] = [];
  private readonly hostStates = new Map<Sequence, HostState>();
  private readonly loads: BlockTransfer[][] = [];
  private readonly queued: BlockTransfer[][] = [];
  private readonly inFlight = new Set<OffloadPlan>();
  private readonly counters: HierarchyRankStats[] = [];
  /** The device managers (always core-backed: no XTensor with a host tier). */
  private readonly devices: BlockManagerImpl[];

  constructor(options: HierarchyBlockManagerPoolOptions) {
    const { base, hostNumBlocks } = splitOptions(options);
    super(base);
    this.hostNumBlocks = hostNumBlocks;
    this.devices = this.managers.map((m) => m as BlockManagerImpl);
    try {
      for (let r = 0; r < this.dpSize; r++) {
        this.hosts.push(
          new BlockManagerImpl({
            numBlocks: hostNumBlocks,
            blockSize: this.blockSize,
            enablePrefixCache: this.enablePrefixCache,
            seed: base.seed ?? 1024,
          }),
        );
        this.loads.push([]);
        this.queued.push([]);
        this.counters.push({ hostHitBlocks: 0, blocksLoaded: 0, blocksOffloaded: 0, offloadBlocksFailed: 0, offloadBlocksInFlight: 0 });
      }
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  static override async create(options: HierarchyBlockManagerPoolOptions): Promise<HierarchyBlockManagerPool> {
    splitOptions(options);
    await loadCore();
    return new HierarchyBlockManagerPool(options);
  }

  // ---- allocation: device first, then the host prefix and its load plan ----

  /** The host tier keys blocks without a tenant salt, so salted sequences are refused here. */
  protected override own(seq: unknown, name = 'sequence'): Sequence {
    const s = super.own(seq, name);
    if (s._salt !== null) throw new TypeError(`${name}: cacheSalt is not supported with a host tier (HierarchyBlockManagerPool)`);
    return s;
  }

  /** Offloads rearrange device tables, so stamped hashes are not reused (see Sequence._hashed). */
  protected override readonly reuseStampedHashes: boolean = false;

  protected override allocateOne(seq: Sequence, numTokens: number): boolean {
    return this.allocateTiered(seq, numTokens, Infinity);
  }

  /**
   * `allocate(seq, numTokens)` copying at most `maxCopyBlocks` host blocks in
   * this step (chunked prefill); the device's computed-token count advances
   * to the end of the blocks copied, and the next call continues.
   */
  allocateChunked(sequence: Sequence, numTokens: number, maxCopyBlocks: number): boolean {
    const seq = this.own(sequence);
    const n = checkInt('numTokens', numTokens);
    const k = checkInt('maxCopyBlocks', maxCopyBlocks);
    return this.allocateTiered(seq, n, k);
  }

  override allocateShared(sequence: Sequence): number {
    const shared = super.allocateShared(sequence);
    const seq = sequence;
    if (this.hostBlocksOf(seq) === 0 && this.inPrefill(seq)) {
      this.matchHost(seq, seq._dpRank);
      if (this.hostBlocksOf(seq) > 0) this.live.add(seq);
    }
    return shared;
  }

  private inPrefill(seq: Sequence): boolean {
    return this.enablePrefixCache && seq._kvCached < seq.numPromptTokens;
  }

  private hostBlocksOf(seq: Sequence): number {
    return this.hostStates.get(seq)?.numBlocks ?? 0;
  }

  private allocateTiered(seq: Sequence, numTokens: number, maxCopy: number): boolean {
    this.checkLoadTargets(seq, numTokens, maxCopy);
    const startedEmpty = seq._numBlocks === 0;
    const noSingle = seq._single < 0 && this.singles[seq._dpRank >= 0 ? seq._dpRank : this.chooseRank()]!.numFreeBlocks() === 0;
    if (!super.allocateOne(seq, numTokens)) {
      // Short of blocks, the reference's rollback resets the whole sequence,
      // its host state included; short of a single id, nothing was touched.
      if (startedEmpty && !noSingle) this.releaseHost(seq);
      return false;
    }
    const r = seq._dpRank;
    if (this.hostBlocksOf(seq) === 0 && this.inPrefill(seq)) this.matchHost(seq, r);
    const h = this.hostStates.get(seq);
    if (h !== undefined && seq._kvCached < h.kvTokens) this.planLoads(seq, h, r, maxCopy);
    return true;
  }

  /**
   * Throws, before anything changes, when the load plan this allocation would
   * emit targets a device block the sequence will not hold (the reference
   * reads out of range there). Only a chunked prefill (numTokens short of the
   * host hit) can get there; other calls skip the look-ahead.
   */
  private checkLoadTargets(seq: Sequence, numTokens: number, maxCopy: number): void {
    const B = this.blockSize;
    const h = this.hostStates.get(seq);
    const held = h?.numBlocks ?? 0;
    const after = Math.ceil(numTokens / B);
    const hostBound = held > 0 ? h!.kvTokens / B : Math.floor((seq._numTokens - 1) / B);
    if (after >= hostBound || maxCopy === 0) return;
    const r = seq._dpRank >= 0 ? seq._dpRank : this.chooseRank();
    const nFull = Math.floor(seq._numTokens / B);
    let devHeld = seq._numBlocks;
    let kv = seq._kvCached;
    if (seq._numBlocks === 0 && this.enablePrefixCache) {
      let hits = this.devices[r]!.peekMatches(seq._tokens, nFull);
      if (hits > 0) {
        if (hits * B === seq._numTokens) hits--;
        devHeld = hits;
        kv = hits * B;
      }
    }
    let hostTokens = 0;
    if (held > 0) hostTokens = h!.kvTokens;
    else if (this.enablePrefixCache && kv < seq.numPromptTokens) {
      let hits = this.hosts[r]!.peekMatches(seq._tokens, nFull);
      if (hits * B === seq._numTokens) hits--;
      hostTokens = Math.max(0, hits) * B;
    }
    if (kv >= hostTokens) return;
    const from = Math.floor(kv / B);
    const end = from + Math.min(maxCopy, hostTokens / B - from);
    const devBlocks = Math.max(devHeld, after);
    if (end > devBlocks) {
      throw new RangeError(
        `numTokens = ${numTokens} leaves the sequence ${devBlocks} device blocks, but the host holds ` +
          `${hostTokens / B} computed blocks of its prompt: the load plan would write device block ${end - 1}, ` +
          `which it does not hold (allocate at least ${end * B} tokens, or copy fewer blocks with allocateChunked)`,
      );
    }
  }

  /** Attaches the host prefix-cache hits of the prompt (exact-prompt rule as on the device). */
  private matchHost(seq: Sequence, r: number): void {
    const B = this.blockSize;
    const nFull = Math.floor(seq._numTokens / B);
    if (nFull === 0) return;
    const host = this.hosts[r]!;
    const h = this.stateOf(seq);
    reserve(h, nFull);
    let hits = host.matchInto(seq._tokens, 0, nFull, 0, h.table, 0);
    if (hits > 0 && hits * B === seq._numTokens) {
      host.releaseFrom(h.table, hits - 1, hits);
      hits--;
    }
    h.numBlocks = hits;
    h.kvTokens = hits * B;
    this.counters[r]!.hostHitBlocks += hits;
    if (hits === 0) this.hostStates.delete(seq);
  }

  /** H2D copies of the host blocks the device has not computed; advances the device's count. */
  private planLoads(seq: Sequence, h: HostState, r: number, maxCopy: number): void {
    const B = this.blockSize;
    const from = Math.floor(seq._kvCached / B);
    const copied = Math.min(maxCopy, h.kvTokens / B - from);
    const host = this.hosts[r]!;
    const out = this.loads[r]!;
    for (let i = from; i < from + copied; i++) {
      const hash = new Uint8Array(16);
      host.blockHashInto(h.table[i]!, hash, 0);
      out.push({ src: h.table[i]!, dst: seq._table[i]!, hash });
    }
    this.counters[r]!.blocksLoaded += copied;
    seq._kvCached = (from + copied) * B;
  }

  private stateOf(seq: Sequence): HostState {
    let h = this.hostStates.get(seq);
    if (h === undefined) {
      h = { table: new Int32Array(16), numBlocks: 0, kvTokens: 0 };
      this.hostStates.set(seq, h);
    }
    return h;
  }

  // ---- release: cache, offload what only this sequence computed, give back ----

  protected override release(seq: Sequence, cacheFirst: boolean): void {
    const r = seq._dpRank;
    if (r < 0) return;
    if (cacheFirst) {
      this.cacheUpTo(seq, seq._kvCached);
      if (this.hostBlocksOf(seq) < seq._numBlocks) this.queueOffload(seq, r);
    }
    this.releaseHost(seq);
    super.release(seq, false);
  }

  /** Gives back the sequence's host blocks in ascending logical order. */
  private releaseHost(seq: Sequence): void {
    const h = this.hostStates.get(seq);
    if (h === undefined) return;
    const code = this.hosts[seq._dpRank]!.releaseFrom(h.table, 0, h.numBlocks);
    if (code < 0) throw new Error(`kvpool: internal error releasing a sequence's host blocks (core code ${code})`);
    this.hostStates.delete(seq);
  }

  /**
   * Moves the computed full blocks that only this sequence and the device
   * cache hold, from the first one the host lacks, into D2G pairs with host
   * blocks (allocated here; when the host is short the offload narrows).
   */
  private queueOffload(seq: Sequence, r: number): void {
    const B = this.blockSize;
    const dev = this.devices[r]!;
    const host = this.hosts[r]!;
    const cachedDev = Math.floor(seq._kvCached / B);
    const prior = this.hostStates.get(seq);
    const cachedHost = prior === undefined ? 0 : Math.floor(prior.kvTokens / B);
    const heldHost = prior?.numBlocks ?? 0;
    if (cachedDev > heldHost) {
      const h = this.stateOf(seq);
      reserve(h, cachedDev - heldHost);
      if (host.allocateInto(cachedDev - heldHost, h.table, heldHost)) h.numBlocks = cachedDev;
    }
    const h = this.hostStates.get(seq);
    if (h === undefined) return;
    const end = Math.min(cachedDev, h.numBlocks, seq._numBlocks);
    const q = this.queued[r]!;
    let moved = 0;
    let keepDev = cachedHost;
    let keepHost = cachedHost;
    for (let i = cachedHost; i < end; i++) {
      const d = seq._table[i]!;
      const hid = h.table[i]!;
      if (dev.refCount(d) === 2 && dev.isCachedId(d)) {
        const hash = new Uint8Array(16);
        dev.blockHashInto(d, hash, 0);
        q.push({ src: d, dst: hid, hash });
        moved++;
      } else {
        seq._table[keepDev++] = d;
        h.table[keepHost++] = hid;
      }
    }
    if (moved === 0) return;
    // Close the gaps the moved blocks left; the rest keep their order.
    for (let i = end; i < seq._numBlocks; i++) seq._table[keepDev++] = seq._table[i]!;
    for (let i = end; i < h.numBlocks; i++) h.table[keepHost++] = h.table[i]!;
    seq._numBlocks = keepDev;
    if (seq._shared > keepDev) seq._shared = keepDev;
    h.numBlocks = keepHost;
    const c = this.counters[r]!;
    c.blocksOffloaded += moved;
    c.offloadBlocksInFlight += moved;
  }

  // ---- transfers ----

  /**
   * Hands the pending copies to the caller, per rank: the load plans made
   * since the last call, and the queued offload pairs as one plan (which stays
   * in flight, its blocks held, until `completeOffload`).
   */
  takeTransfers(): RankTransfers[] {
    this.ensureOpen();
    const out: RankTransfers[] = [];
    for (let r = 0; r < this.dpSize; r++) {
      const loads = this.loads[r]!;
      const q = this.queued[r]!;
      let offload: OffloadPlan | null = null;
      if (q.length > 0) {
        offload = Object.freeze({ dpRank: r, blocks: Object.freeze(q) });
        this.inFlight.add(offload);
        this.queued[r] = [];
      }
      this.loads[r] = [];
      out.push({ loads, offload });
    }
    return out;
  }

  /** True when a load plan or an offload pair waits for `takeTransfers` (cheap; nothing allocated). */
  hasPendingTransfers(): boolean {
    this.ensureOpen();
    for (let r = 0; r < this.dpSize; r++) if (this.loads[r]!.length > 0 || this.queued[r]!.length > 0) return true;
    return false;
  }

  /**
   * Finishes an offload plan: the device blocks are given back (they stay in
   * the device cache), and when `ok` the host blocks are cached under their
   * hashes; a failed copy (`ok` false) gives the host blocks back uncached.
   */
  completeOffload(plan: OffloadPlan, ok = true): void {
    this.ensureOpen();
    checkObject('plan', plan);
    checkBool('ok', ok);
    if (!this.inFlight.has(plan)) {
      throw new Error(`plan is not an offload plan in flight in this pool (already completed, or not from takeTransfers): ${describe(plan)}`);
    }
    const r = plan.dpRank;
    const n = plan.blocks.length;
    const src = new Int32Array(n);
    const dst = new Int32Array(n);
    const hashes = new Uint8Array(n * 16);
    plan.blocks.forEach((b, i) => {
      src[i] = b.src;
      dst[i] = b.dst;
      hashes.set(b.hash, i * 16);
    });
    const host = this.hosts[r]!;
    if (ok && host.insertHashesFrom(dst, 0, n, hashes, 0) < 0) {
      throw new Error('kvpool: internal error caching offloaded host blocks');
    }
    if (this.managers[r]!.releaseFrom(src, 0, n) < 0 || host.releaseFrom(dst, 0, n) < 0) {
      throw new Error('kvpool: internal error releasing an offload plan');
    }
    this.inFlight.delete(plan);
    const c = this.counters[r]!;
    c.offloadBlocksInFlight -= n;
    if (!ok) c.offloadBlocksFailed += n;
  }

  /** Offload plans taken and not completed yet. */
  offloadsInFlight(): readonly OffloadPlan[] {
    this.ensureOpen();
    return [...this.inFlight];
  }

  // ---- per-sequence host view ----

  /** The sequence's host block ids in logical order (a copy). */
  hostBlockTable(sequence: Sequence): Int32Array {
    const seq = this.own(sequence);
    const h = this.hostStates.get(seq);
    return h === undefined ? new Int32Array(0) : h.table.slice(0, h.numBlocks);
  }

  /** Prompt tokens whose KV the host tier holds for the sequence. */
  hostKvCachedTokens(sequence: Sequence): number {
    return this.hostStates.get(this.own(sequence))?.kvTokens ?? 0;
  }

  // ---- figures ----

  hostNumFreeBlocks(): number[] {
    this.ensureOpen();
    return this.hosts.map((m) => m.numFreeBlocks());
  }

  hostNumUsedBlocks(): number[] {
    this.ensureOpen();
    return this.hosts.map((m) => m.numUsedBlocks());
  }

  hostNumBlocksInPrefixCache(): number[] {
    this.ensureOpen();
    return this.hosts.map((m) => m.numBlocksInPrefixCache());
  }

  hostStats(): BlockManagerStats[] {
    this.ensureOpen();
    return this.hosts.map((m) => m.stats());
  }

  hierarchyStats(): HierarchyRankStats[] {
    this.ensureOpen();
    return this.counters.map((c) => ({ ...c }));
  }

  // ---- audit ----

  protected override addExtraHolders(rank: number, counts: Int32Array): void {
    for (const b of this.queued[rank]!) counts[b.src]!++;
    for (const p of this.inFlight) if (p.dpRank === rank) for (const b of p.blocks) counts[b.src]!++;
  }

  override check(): void {
    super.check();
    const B = this.blockSize;
    for (let r = 0; r < this.dpSize; r++) {
      const host = this.hosts[r]!;
      host.check();
      const expected = new Int32Array(this.hostNumBlocks);
      for (const [seq, h] of this.hostStates) {
        if (seq._dpRank !== r) continue;
        if (!this.live.has(seq)) throw new Error('kvpool: a sequence holds host blocks but no device state');
        if (h.numBlocks === 0 || h.kvTokens !== h.numBlocks * B) {
          throw new Error(`kvpool: a sequence's host state is inconsistent (${h.numBlocks} blocks, ${h.kvTokens} tokens)`);
        }
        for (let i = 0; i < h.numBlocks; i++) expected[h.table[i]!]!++;
      }
      let inFlight = this.queued[r]!.length;
      for (const b of this.queued[r]!) expected[b.dst]!++;
      for (const p of this.inFlight) {
        if (p.dpRank !== r) continue;
        inFlight += p.blocks.length;
        for (const b of p.blocks) expected[b.dst]!++;
      }
      if (inFlight !== this.counters[r]!.offloadBlocksInFlight) throw new Error(`kvpool: rank ${r} in-flight offload count is wrong`);
      const actual = host.holderCounts();
      for (let id = 1; id < actual.length; id++) {
        if (actual[id] !== expected[id]) {
          throw new Error(`kvpool: rank ${r} host block ${id} has ${actual[id]} holders but sequences and plans hold it ${expected[id]} times`);
        }
      }
    }
  }

  override dispose(): void {
    super.dispose();
    for (const h of this.hosts) h.dispose();
  }
}

function reserve(h: HostState, more: number): void {
  const need = h.numBlocks + more;
  if (need <= h.table.length) return;
  let cap = h.table.length * 2;
  while (cap < need) cap *= 2;
  const t = new Int32Array(cap);
  t.set(h.table.subarray(0, h.numBlocks));
  h.table = t;
}
