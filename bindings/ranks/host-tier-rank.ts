// The host tier (see docs/host-tier.md) as a wrapper around a rank: a second,
// larger tier in host memory with its own prefix cache keeps KV that left the
// device, so a later prompt with the same prefix loads it back (H2D) instead
// of recomputing it. Finished sequences offload their freshly computed full
// blocks (D2H) to host blocks.
//
// Every block in flight is owned by a plan: an offload's device block stays
// held (and counted as used) and its host block is held by the plan until
// `completeOffload`, which caches the host block under the device block's
// hash. Load plans own nothing: their blocks are the sequence's. With linear
// state, host hits are cut back to checkpointed boundaries exactly as device
// hits are, so a load never advances a sequence past a state it can restore.

import type { BlockManagerImpl } from '../managers/block-manager-impl.js';
import type { BlockManagerStats } from '../managers/block-manager.js';
import { EV_PARENT_CHAIN, EV_PARENT_NONE, EV_PARENT_SALT } from '../core/abi.js';
import type { BlocksAnnounced } from '../managers/core-manager.js';
import type { CoreBytes, CoreInstance } from '../core/core-instance.js';
import { CPU_SOURCE, type KVEventRecordVisitor, type RecordEventsOptions } from '../managers/kv-events.js';
import { BlockTableRank, compareHolders } from './block-table-rank.js';
import type { BlockTransferInfo, RankManager } from './rank-manager.js';
import type { HostBlocks, SequenceState } from './sequence-state.js';

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

/** Copies from the KV-cache store into host blocks (src is -1: the store), in prompt order. */
export interface PrefetchPlan {
  readonly dpRank: number;
  readonly blocks: readonly BlockTransfer[];
  /** The blocks' 16-byte hashes packed in order (for looking them up in bulk; `blocks[i].hash` is bytes 16i..16i+16). */
  readonly hashes: Uint8Array;
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
  /** Blocks asked of the KV-cache store by prefetches. */
  blocksPrefetched: number;
  /** Of those, blocks the store delivered (reported by updatePrefetchResult). */
  blocksFetched: number;
  /** Blocks in offload plans not completed yet (queued or taken). */
  offloadBlocksInFlight: number;
}

/**
 * Block copies as parallel arrays (src, dst, 16-byte hashes), growing by
 * doubling: what the host tier plans per block, with BlockTransfer objects
 * made only when a caller reads them (a replay that completes every plan at
 * once never does).
 */
class TransferBuffer {
  src = new Int32Array(16);
  dst = new Int32Array(16);
  hashes = new Uint8Array(16 * 16);
  n = 0;

  /** Room for `k` more copies. */
  reserve(k: number): void {
    const need = this.n + k;
    if (need <= this.src.length) return;
    let cap = this.src.length * 2;
    while (cap < need) cap *= 2;
    const n = this.n;
    const src = new Int32Array(cap);
    const dst = new Int32Array(cap);
    const hashes = new Uint8Array(cap * 16);
    src.set(this.src.subarray(0, n));
    dst.set(this.dst.subarray(0, n));
    hashes.set(this.hashes.subarray(0, n * 16));
    this.src = src;
    this.dst = dst;
    this.hashes = hashes;
  }

  /** The copies so far as a list of their own (the buffer starts over). */
  take(): TransferList {
    const n = this.n;
    // One allocation for the three arrays (24 bytes per copy).
    const buf = new ArrayBuffer(n * 24);
    const src = new Int32Array(buf, 0, n);
    const dst = new Int32Array(buf, n * 4, n);
    const hashes = new Uint8Array(buf, n * 8, n * 16);
    src.set(this.src.subarray(0, n));
    dst.set(this.dst.subarray(0, n));
    hashes.set(this.hashes.subarray(0, n * 16));
    this.n = 0;
    return new TransferList(src, dst, hashes);
  }
}

/** A settled list of copies; `objects()` makes (once) the BlockTransfer array callers read. */
class TransferList {
  private made: readonly BlockTransfer[] | null = null;
  constructor(
    readonly src: Int32Array,
    readonly dst: Int32Array,
    readonly hashes: Uint8Array,
  ) {}

  get length(): number {
    return this.src.length;
  }

  objects(): readonly BlockTransfer[] {
    if (this.made === null) {
      const out: BlockTransfer[] = [];
      for (let i = 0; i < this.src.length; i++) {
        out.push(Object.freeze({ src: this.src[i]!, dst: this.dst[i]!, hash: this.hashes.slice(i * 16, i * 16 + 16) }));
      }
      this.made = Object.freeze(out);
    }
    return this.made;
  }
}

/** What each offload plan handed out carries (for its life); kept out of the plan so a caller cannot change what completeOffload caches. */
const planCopies = new WeakMap<OffloadPlan, TransferList>();

/** An offload plan: its `blocks` are made on first read from the copies recorded when it was taken. */
class CompactOffloadPlan implements OffloadPlan {
  declare readonly blocks: readonly BlockTransfer[];

  constructor(readonly dpRank: number) {
    // An own enumerable getter: a structured clone (a plan posted to a worker) carries the blocks.
    Object.defineProperty(this, 'blocks', { enumerable: true, get: () => planCopies.get(this)!.objects() });
  }
}

/** A prefetch plan: its `blocks` made on first read from copies of what the pool keeps (so a caller cannot change what is cached). */
class CompactPrefetchPlan implements PrefetchPlan {
  declare readonly blocks: readonly BlockTransfer[];

  constructor(
    readonly dpRank: number,
    dst: Int32Array,
    readonly hashes: Uint8Array,
  ) {
    let made: readonly BlockTransfer[] | null = null;
    // An own enumerable getter, as an offload plan's: a structured clone carries the blocks.
    Object.defineProperty(this, 'blocks', {
      enumerable: true,
      get: () => {
        if (made === null) {
          const out: BlockTransfer[] = [];
          for (let i = 0; i < dst.length; i++) out.push(Object.freeze({ src: -1, dst: dst[i]!, hash: hashes.slice(i * 16, i * 16 + 16) }));
          made = Object.freeze(out);
        }
        return made;
      },
    });
  }
}

/** The transfers of one take: `loads` made on first read. */
function rankTransfers(loads: TransferList | null, offload: OffloadPlan | null): RankTransfers {
  const t = {} as { loads: readonly BlockTransfer[]; offload: OffloadPlan | null };
  Object.defineProperty(t, 'loads', { enumerable: true, get: () => (loads === null ? [] : loads.objects()) });
  t.offload = offload;
  return t;
}

export class HostTierRank implements RankManager {
  readonly kind = 'plain' as const;
  readonly blockSize: number;
  readonly prefixCache: boolean;
  readonly counters: HierarchyRankStats = {
    hostHitBlocks: 0, blocksLoaded: 0, blocksOffloaded: 0, offloadBlocksFailed: 0, offloadBlocksInFlight: 0, blocksPrefetched: 0, blocksFetched: 0,
  };
  private readonly loads = new TransferBuffer();
  /** Host tables of released sequences, reused (a table grows to the prompt's length). */
  private readonly spareTables: Int32Array[] = [];
  private readonly queued = new TransferBuffer();
  readonly inFlight = new Set<OffloadPlan>();
  /** While the host records events: what each queued block's stored event will say (parallel to `queued`). */
  private queuedAbout: AnnouncedBlock[] = [];
  /** The same for each plan in flight that has it. */
  private readonly planAbout = new Map<OffloadPlan, AnnouncedBlock[]>();
  /**
   * @internal Offloads complete as they are queued, as completeTransfersNow()
   * right after each release would complete them (the replay's worker; see
   * HierarchyBlockManagerPool.completeOffloadsAtRelease).
   */
  completeAtRelease = false;

  constructor(
    readonly inner: BlockTableRank,
    /** The host block manager (same core as the device's). */
    readonly host: BlockManagerImpl,
    readonly dpRank: number,
  ) {
    this.blockSize = inner.blockSize;
    this.prefixCache = inner.prefixCache;
  }

  get kv() {
    return this.inner.kv;
  }

  get linear() {
    return this.inner.linear;
  }

  get transfers(): BlockTransferInfo[] {
    return this.inner.transfers;
  }

  /** The device manager (core-backed: a host tier needs a prefix cache on the device). */
  private get device(): BlockManagerImpl {
    return this.inner.kv as BlockManagerImpl;
  }

  enter(): void {}

  exit(): void {}

  // ---- allocation: device first, then the host prefix and its load plan ----

  fits(s: SequenceState, numTokens: number): boolean {
    if (!this.inner.fits(s, numTokens)) return false;
    const h = s.host;
    return h === null ? !this.inPrefill(s) : s.kvCached >= h.kvTokens;
  }

  allocate(s: SequenceState, numTokens: number, maxCopyBlocks = Infinity): boolean {
    this.takeBeamHost(s);
    const startedEmpty = s.numBlocks === 0;
    if (!this.inner.allocate(s, numTokens)) {
      // Short of blocks, the reference's rollback resets the whole sequence, its host state included.
      if (startedEmpty) this.releaseHost(s);
      return false;
    }
    if (this.hostBlocksOf(s) === 0 && this.inPrefill(s)) this.matchHost(s);
    const h = s.host;
    if (h !== null && s.kvCached < h.kvTokens) this.planLoads(s, h, maxCopyBlocks);
    return true;
  }

  /**
   * @internal Decode steps of a sequence that fits as is (no host load owed,
   * out of prefill): allocate() would only grow its device table, as the
   * inner rank's steps do.
   */
  growSteps(s: SequenceState, k: number): number {
    return this.fits(s, s.numTokens) ? this.inner.growSteps(s, k) : -1;
  }

  tryAllocate(s: SequenceState): boolean {
    return this.inner.tryAllocate(s);
  }

  allocateShared(s: SequenceState): void {
    this.inner.allocateShared(s);
    if (this.hostBlocksOf(s) === 0 && this.inPrefill(s)) this.matchHost(s);
  }

  private inPrefill(s: SequenceState): boolean {
    return this.prefixCache && s.kvCached < s.numPromptTokens;
  }

  private hostBlocksOf(s: SequenceState): number {
    return s.host?.numBlocks ?? 0;
  }

  /**
   * A beam the sequence adopted replaces its own blocks at its next
   * allocation (or caching, or release): its host blocks, which hold its
   * own prompt's KV, go with them.
   */
  private takeBeamHost(s: SequenceState): void {
    if (s.beamSource !== null) this.releaseHost(s);
  }

  /**
   * Throws, before anything changes, when the load plan this allocation would
   * emit targets a device block the sequence will not hold (the reference
   * reads out of range there). Only a chunked prefill (numTokens short of the
   * host hit) can get there; other calls skip the look-ahead.
   */
  precheck(s: SequenceState, numTokens: number, maxCopy = Infinity): void {
    const B = this.blockSize;
    // A pending beam: the allocation continues on the source's blocks, with no host blocks.
    const beam = s.beamSource;
    const h = beam === null ? s.host : null;
    const held = h?.numBlocks ?? 0;
    const after = Math.ceil(numTokens / B);
    const hostBound = held > 0 ? h!.kvTokens / B : Math.floor((s.numTokens - 1) / B);
    if (after >= hostBound || maxCopy === 0) return;
    const nFull = Math.floor(s.numTokens / B);
    let devHeld = beam === null ? s.numBlocks : beam.table.length;
    let kv = s.kvCached;
    if (devHeld === 0 && this.prefixCache) {
      let hits = this.device.peekMatches(s.tokens, nFull, s.saltKey);
      if (hits > 0) {
        if (hits * B === s.numTokens) hits--;
        devHeld = hits;
        kv = hits * B;
      }
    }
    let hostTokens = 0;
    if (held > 0) hostTokens = h!.kvTokens;
    else if (this.prefixCache && kv < s.numPromptTokens) {
      let hits = this.host.peekMatches(s.tokens, nFull, s.saltKey);
      if (hits * B === s.numTokens) hits--;
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

  /** Attaches the host prefix-cache hits of the prompt (checkpoints and the exact-prompt rule as on the device). */
  private matchHost(s: SequenceState): void {
    const B = this.blockSize;
    const nFull = Math.floor(s.numTokens / B);
    if (nFull === 0) return;
    const host = this.host;
    const h = s.host ?? this.newHostBlocks();
    reserve(h, nFull);
    let hits = host.matchInto(s.tokens, 0, nFull, 0, h.table, 0, s.saltKey);
    const linear = this.inner.linear;
    if (linear !== null && hits > 0) {
      const keep = linear.keep(host, h.table, s.numTokens, Math.min(Math.floor(s.kvCached / B), hits), hits);
      if (keep < hits) host.releaseFrom(h.table, keep, hits);
      hits = keep;
    }
    if (hits > 0 && hits * B === s.numTokens) {
      host.releaseFrom(h.table, hits - 1, hits);
      hits--;
    }
    h.numBlocks = hits;
    h.kvTokens = hits * B;
    this.counters.hostHitBlocks += hits;
    if (hits === 0 && s.host === null && this.spareTables.length < 64) this.spareTables.push(h.table);
    s.host = hits === 0 ? null : h;
  }

  /** H2D copies of the host blocks the device has not computed; advances the device's count. */
  private planLoads(s: SequenceState, h: HostBlocks, maxCopy: number): void {
    const B = this.blockSize;
    const from = Math.floor(s.kvCached / B);
    const copied = Math.min(maxCopy, h.kvTokens / B - from);
    if (copied > 0) {
      const l = this.loads;
      l.reserve(copied);
      // The loaded device blocks carry the host blocks' hashes from now on: caching them later hashes nothing.
      const stamped = this.device.stampLoadedInto(this.host, h.table, s.table, from, copied, l.hashes, l.n);
      if (stamped < 0) throw new Error(`kvpool: internal error stamping loaded blocks (core code ${stamped})`);
      if (s.hashed >= from) s.hashed = Math.max(s.hashed, from + stamped);
      l.src.set(h.table.subarray(from, from + copied), l.n);
      l.dst.set(s.table.subarray(from, from + copied), l.n);
      l.n += copied;
    }
    this.counters.blocksLoaded += copied;
    s.kvCached = (from + copied) * B;
  }

  // ---- release: cache, offload what only this sequence computed, give back ----

  cache(s: SequenceState, numTokens: number): void {
    this.takeBeamHost(s);
    this.inner.cache(s, numTokens);
  }

  release(s: SequenceState, cacheFirst: boolean): void {
    this.takeBeamHost(s);
    if (cacheFirst) {
      this.inner.cache(s, s.kvCached);
      if (this.completeAtRelease && this.queued.n === 0 && s.beamSource === null && !this.host.recordingEvents && !this.device.recordingEvents) {
        this.releaseCompleting(s);
        return;
      }
      if (this.hostBlocksOf(s) < s.numBlocks) this.queueOffload(s);
    }
    this.releaseHost(s);
    this.inner.release(s, false);
  }

  /**
   * release(s, true) after the cache, with the offload completed at once as
   * completeTransfersNow() would complete it (nothing else is queued), in
   * one core call.
   */
  private releaseCompleting(s: SequenceState): void {
    const B = this.blockSize;
    const h = s.host;
    const moved = this.device.releaseOffloadNow(
      this.host, s.table, s.numBlocks, h?.table ?? null, h?.numBlocks ?? 0, h === null ? 0 : Math.floor(h.kvTokens / B), Math.floor(s.kvCached / B),
    );
    if (moved < 0) throw new Error(`kvpool: internal error releasing and offloading a sequence (core code ${moved})`);
    this.counters.blocksOffloaded += moved;
    if (h !== null) {
      s.host = null;
      if (this.spareTables.length < 64) this.spareTables.push(h.table);
    }
    s.resetBlocks();
  }

  /** Gives back the sequence's host blocks in ascending logical order. */
  private releaseHost(s: SequenceState): void {
    const h = s.host;
    if (h === null) return;
    const code = this.host.releaseFrom(h.table, 0, h.numBlocks);
    if (code < 0) throw new Error(`kvpool: internal error releasing a sequence's host blocks (core code ${code})`);
    s.host = null;
    if (this.spareTables.length < 64) this.spareTables.push(h.table);
  }

  private newHostBlocks(): HostBlocks {
    return { table: this.spareTables.pop() ?? new Int32Array(16), numBlocks: 0, kvTokens: 0, prefetch: null };
  }

  /**
   * Moves the computed full blocks that only this sequence and the device
   * cache hold, from the first one the host lacks, into D2H pairs with host
   * blocks (allocated here; when the host is short the offload narrows).
   */
  private queueOffload(s: SequenceState): void {
    const B = this.blockSize;
    const dev = this.device;
    const host = this.host;
    const cachedDev = Math.floor(s.kvCached / B);
    const prior = s.host;
    const cachedHost = prior === null ? 0 : Math.floor(prior.kvTokens / B);
    const heldHost = prior?.numBlocks ?? 0;
    if (cachedDev > heldHost) {
      const h = prior ?? this.newHostBlocks();
      reserve(h, cachedDev - heldHost);
      if (host.allocateInto(cachedDev - heldHost, h.table, heldHost)) {
        h.numBlocks = cachedDev;
        s.host = h;
      }
    }
    const h = s.host;
    if (h === null) return;
    const end = Math.min(cachedDev, h.numBlocks, s.numBlocks);
    const q = this.queued;
    q.reserve(Math.max(0, end - cachedHost));
    let moved: number;
    if (this.host.recordingEvents && end > cachedHost) {
      // The chain hashes of the sequence name each block's parent in the host's stored events.
      const chain = this.inner.prefixHashes(s, end);
      moved = 0;
      let keep = cachedHost;
      for (let i = cachedHost; i < end; i++) {
        const d = s.table[i]!;
        const hid = h.table[i]!;
        if (dev.refCount(d) === 2 && dev.isCachedId(d)) {
          const at = q.n + moved;
          q.src[at] = d;
          q.dst[at] = hid;
          dev.blockHashInto(d, q.hashes, at * 16);
          this.queuedAbout.push(announced(this.host.rt, s, i, B, chain));
          moved++;
        } else {
          s.table[keep] = d;
          h.table[keep++] = hid;
        }
      }
    } else {
      // The pairs that move go to the queue; the others close up from cachedHost on.
      moved = dev.offloadPickInto(s.table, h.table, cachedHost, end, q.src, q.dst, q.hashes, q.n);
    }
    if (moved === 0) return;
    q.n += moved;
    // Close the gaps the moved blocks left; the rest keep their order.
    s.table.copyWithin(end - moved, end, s.numBlocks);
    h.table.copyWithin(end - moved, end, h.numBlocks);
    s.unstampFrom(cachedHost);
    s.numBlocks -= moved;
    if (s.shared > s.numBlocks) s.shared = s.numBlocks;
    h.numBlocks -= moved;
    this.counters.blocksOffloaded += moved;
    this.counters.offloadBlocksInFlight += moved;
  }

  // ---- the KV-cache store (the reference's prefetch_from_storage) ----

  /**
   * Prefetch from the KV-cache store: the host prefix hits are attached
   * first (if the sequence has none); then host blocks are taken for every
   * block of the sequence after them, and the plan asks the store for all
   * but the last (the last, partial block is never fetched). Null when there
   * is nothing to fetch or the host is short of blocks (the host hits stay).
   */
  prefetch(s: SequenceState): PrefetchPlan | null {
    if (s.host?.prefetch) throw new Error('prefetchFromStorage: a prefetch of this sequence is pending; report it with updatePrefetchResult first');
    if (s.host === null && this.inPrefill(s)) this.matchHost(s);
    const B = this.blockSize;
    const h = s.host ?? this.newHostBlocks();
    const shared = h.kvTokens / B;
    if (h.numBlocks > shared) throw new Error('prefetchFromStorage: the sequence holds host blocks past its host prefix already');
    const additional = Math.ceil(s.numTokens / B) - shared;
    if (additional <= 1) return null;
    reserve(h, additional);
    if (!this.host.allocateInto(additional, h.table, shared)) return null;
    h.numBlocks = shared + additional;
    s.host = h;
    // The chain hashes of the blocks to fetch, chained on the host prefix (or the salt).
    const n = additional - 1;
    const hashes = this.chainHashes(s, h, shared, n);
    const dst = h.table.slice(shared, shared + n);
    h.prefetch = { dst, hashes };
    this.counters.blocksPrefetched += n;
    return new CompactPrefetchPlan(this.dpRank, dst.slice(), hashes.slice());
  }

  /** Hashes of blocks [from, from + n) of `s`, chained on the hash stamped on host block from - 1. */
  private chainHashes(s: SequenceState, h: HostBlocks, from: number, n: number): Uint8Array {
    const B = this.blockSize;
    const host = this.host;
    const rt = host.rt;
    const out = rt.staging.byteSpace(16 + n * 16);
    let parent = 0;
    if (from > 0) {
      const p = new Uint8Array(16);
      host.blockHashInto(h.table[from - 1]!, p, 0);
      rt.u8.set(p, out);
      parent = out;
    } else if (s.saltKey !== null) {
      rt.u8.set(s.saltKey, out);
      parent = out;
    }
    const tok = rt.staging.stageTokens(s.tokens, from * B, (from + n) * B);
    rt.ex.hash_blocks_from(tok, n * B, B, host.seedLo, host.seedHi, parent, out + 16);
    return rt.u8.slice(out + 16, out + 16 + n * 16);
  }

  /**
   * The store delivered the first `success` blocks of the pending prefetch
   * (the least over the workers, capped by the plan): the host prefix grows
   * by them and they enter the host cache under their hashes. Returns it.
   */
  updatePrefetch(s: SequenceState, success: number): number {
    const h = s.host;
    const plan = h?.prefetch;
    if (!h || !plan) throw new Error('updatePrefetchResult: no prefetch of this sequence is pending');
    const n = Math.min(success, plan.dst.length);
    if (n > 0) {
      const about = this.host.recordingEvents ? this.fetchedAbout(s, h, n) : undefined;
      if (this.host.insertHashesFrom(plan.dst, 0, n, plan.hashes, 0, about) < 0) throw new Error('kvpool: internal error caching prefetched host blocks');
    }
    h.kvTokens += n * this.blockSize;
    h.prefetch = null;
    this.counters.blocksFetched += n;
    return n;
  }

  /** What the stored events of the first `n` fetched blocks say: tokens, and parents chained from the host prefix (or the salt). */
  private fetchedAbout(s: SequenceState, h: HostBlocks, n: number): BlocksAnnounced {
    const B = this.blockSize;
    const from = h.kvTokens / B;
    const plan = h.prefetch!;
    const about: AnnouncedBlock[] = [];
    for (let i = 0; i < n; i++) {
      const tokens = stagedTokens(this.host.rt, s, (from + i) * B, (from + i + 1) * B);
      if (i > 0) about.push({ kind: EV_PARENT_CHAIN, parent: plan.hashes.subarray((i - 1) * 16, i * 16), tokens });
      else if (from > 0) {
        const parent = new Uint8Array(16);
        this.host.blockHashInto(h.table[from - 1]!, parent, 0);
        about.push({ kind: EV_PARENT_CHAIN, parent, tokens });
      } else about.push(s.saltKey !== null ? { kind: EV_PARENT_SALT, parent: s.saltKey, tokens } : { kind: EV_PARENT_NONE, parent: null, tokens });
    }
    return packAnnounced(about, B);
  }

  // ---- transfers ----

  /** The pending copies: the load plans made since the last call, and the queued offload pairs as one plan (in flight until completed). */
  takeTransfers(): RankTransfers {
    let offload: OffloadPlan | null = null;
    if (this.queued.n > 0) {
      offload = Object.freeze(new CompactOffloadPlan(this.dpRank));
      planCopies.set(offload, this.queued.take());
      this.inFlight.add(offload);
      if (this.queuedAbout.length === planCopies.get(offload)!.length) this.planAbout.set(offload, this.queuedAbout);
      this.queuedAbout = [];
    }
    return rankTransfers(this.loads.n > 0 ? this.loads.take() : null, offload);
  }

  hasPendingTransfers(): boolean {
    return this.loads.n > 0 || this.queued.n > 0;
  }

  /**
   * Does this rank's pending copies at once (see
   * HierarchyBlockManagerPool.completeTransfersNow): the load plans are
   * dropped, and the queued offload pairs finish as completeOffload(plan,
   * true) would finish them as one plan, in the same order (host blocks
   * cached, device blocks given back, host blocks given back), with no plan
   * made. `onOffload` sees the offloaded blocks' hashes first. Returns the
   * blocks offloaded.
   */
  completeTransfersNow(onOffload?: (dpRank: number, hashes: Uint8Array) => void): number {
    this.loads.n = 0;
    const q = this.queued;
    const n = q.n;
    if (n === 0) return 0;
    onOffload?.(this.dpRank, q.hashes.subarray(0, n * 16));
    const about = this.queuedAbout.length === n ? packAnnounced(this.queuedAbout, this.blockSize) : undefined;
    this.queuedAbout = [];
    q.n = 0;
    if (this.host.insertHashesFrom(q.dst, 0, n, q.hashes, 0, about) < 0) throw new Error('kvpool: internal error caching offloaded host blocks');
    if (this.device.releaseFrom(q.src, 0, n) < 0 || this.host.releaseFrom(q.dst, 0, n) < 0) {
      throw new Error('kvpool: internal error releasing offloaded blocks');
    }
    this.counters.offloadBlocksInFlight -= n;
    return n;
  }

  /** Finishes an offload plan of this rank (see HierarchyBlockManagerPool.completeOffload). */
  completeOffload(plan: OffloadPlan, ok: boolean): void {
    const c = planCopies.get(plan)!;
    const n = c.length;
    const about = this.planAbout.get(plan);
    this.planAbout.delete(plan);
    if (ok && this.host.insertHashesFrom(c.dst, 0, n, c.hashes, 0, about && packAnnounced(about, this.blockSize)) < 0) {
      throw new Error('kvpool: internal error caching offloaded host blocks');
    }
    if (this.device.releaseFrom(c.src, 0, n) < 0 || this.host.releaseFrom(c.dst, 0, n) < 0) {
      throw new Error('kvpool: internal error releasing an offload plan');
    }
    this.inFlight.delete(plan); // its copies stay readable through plan.blocks
    this.counters.offloadBlocksInFlight -= n;
    if (!ok) this.counters.offloadBlocksFailed += n;
  }

  // ---- everything else is the device's ----

  fork(parent: SequenceState, child: SequenceState): void {
    this.inner.fork(parent, child);
  }

  adoptBeam(child: SequenceState, source: SequenceState, swap: boolean): void {
    this.inner.adoptBeam(child, source, swap);
  }

  holds(s: SequenceState): boolean {
    return this.inner.holds(s) || s.host !== null;
  }

  prefixHashes(s: SequenceState, nBlocks: number): Uint8Array {
    return this.inner.prefixHashes(s, nBlocks);
  }

  prefixHashesIn(s: SequenceState, nBlocks: number, extra: number): CoreBytes | null {
    return this.inner.prefixHashesIn(s, nBlocks, extra);
  }

  numFreeBlocks(): number {
    return this.inner.numFreeBlocks();
  }

  numUsedBlocks(): number {
    return this.inner.numUsedBlocks();
  }

  numBlocksInPrefixCache(): number {
    return this.inner.numBlocksInPrefixCache();
  }

  kvCacheUtilization(): number {
    return this.inner.kvCacheUtilization();
  }

  stats(): BlockManagerStats {
    return this.inner.stats();
  }

  recordEvents(on: boolean, options?: RecordEventsOptions): void {
    this.inner.recordEvents(on, options);
    this.host.recordEvents(on, options);
  }

  drainEventRecords(visit: KVEventRecordVisitor): void {
    this.inner.drainEventRecords(visit);
    this.host.drainEventRecords(CPU_SOURCE, visit);
  }

  snapshotEventRecords(visit: KVEventRecordVisitor): void {
    this.inner.snapshotEventRecords(visit);
    this.host.snapshotEventRecords(CPU_SOURCE, visit);
  }

  resetPrefixCache(): number {
    return this.inner.resetPrefixCache();
  }

  time(): number {
    return this.inner.time();
  }

  setTime(t: number): void {
    this.inner.setTime(t);
    this.host.setTime(t);
  }

  check(placed: readonly SequenceState[], rank: number, extra: Int32Array): void {
    const q = this.queued;
    const inFlight = [...this.inFlight].map((p) => planCopies.get(p)!);
    this.inner.check(placed, rank, extra, (counts) => {
      for (let i = 0; i < q.n; i++) counts[q.src[i]!]!++;
      for (const c of inFlight) for (const id of c.src) counts[id]!++;
    });
    const B = this.blockSize;
    this.host.check();
    const expected = new Int32Array(this.host.numBlocks);
    for (const s of placed) {
      const h = s.host;
      if (h === null) continue;
      if (h.numBlocks === 0 || h.kvTokens % B !== 0 || h.kvTokens > h.numBlocks * B) {
        throw new Error(`kvpool: a sequence's host state is inconsistent (${h.numBlocks} blocks, ${h.kvTokens} tokens)`);
      }
      for (let i = 0; i < h.numBlocks; i++) expected[h.table[i]!]!++;
    }
    let blocksInFlight = q.n;
    for (let i = 0; i < q.n; i++) expected[q.dst[i]!]!++;
    for (const c of inFlight) {
      blocksInFlight += c.length;
      for (const id of c.dst) expected[id]!++;
    }
    if (blocksInFlight !== this.counters.offloadBlocksInFlight) throw new Error(`kvpool: rank ${rank} in-flight offload count is wrong`);
    const actual = this.host.holderCounts();
    for (let id = 1; id < actual.length; id++) {
      if (actual[id] !== expected[id]) {
        throw new Error(`kvpool: rank ${rank} host block ${id} has ${actual[id]} holders but sequences and plans hold it ${expected[id]} times`);
      }
    }
  }

  dispose(): void {
    this.inner.dispose();
    this.host.dispose();
  }
}

function reserve(h: HostBlocks, more: number): void {
  const need = h.numBlocks + more;
  if (need <= h.table.length) return;
  let cap = h.table.length * 2;
  while (cap < need) cap *= 2;
  const t = new Int32Array(cap);
  t.set(h.table.subarray(0, h.numBlocks));
  h.table = t;
}

export { compareHolders };

/** What a host block's stored event says: its parent (kind, hash) and tokens. */
interface AnnouncedBlock {
  kind: number;
  parent: Uint8Array | null;
  tokens: Int32Array;
}

/**
 * Tokens [from, to) of `s` as `rt` stages them: a copy of the sequence's,
 * or of the prompt a replay keeps in the core only (docs/replay-kernel.md),
 * whose buffer does not hold it.
 */
function stagedTokens(rt: CoreInstance, s: SequenceState, from: number, to: number): Int32Array {
  const p = rt.staging.stageTokens(s.tokens, from, to) >>> 2;
  return rt.i32.slice(p, p + (to - from));
}

/** Block `i` of `s`: its parent is block i - 1's chain hash (`chain`, 16 bytes a block), or the salt, or none. */
function announced(rt: CoreInstance, s: SequenceState, i: number, B: number, chain: Uint8Array): AnnouncedBlock {
  const tokens = stagedTokens(rt, s, i * B, (i + 1) * B);
  if (i > 0) return { kind: EV_PARENT_CHAIN, parent: chain.slice((i - 1) * 16, i * 16), tokens };
  return s.saltKey !== null ? { kind: EV_PARENT_SALT, parent: s.saltKey, tokens } : { kind: EV_PARENT_NONE, parent: null, tokens };
}

function packAnnounced(about: readonly AnnouncedBlock[], B: number): BlocksAnnounced {
  const n = about.length;
  const out: BlocksAnnounced = { parentKinds: new Int32Array(n), parents: new Uint8Array(n * 16), tokens: new Int32Array(n * B) };
  about.forEach((a, i) => {
    out.parentKinds[i] = a.kind;
    if (a.parent !== null) out.parents.set(a.parent, i * 16);
    out.tokens.set(a.tokens, i * B);
  });
  return out;
}
