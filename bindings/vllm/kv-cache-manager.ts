// vLLM's KVCacheManager on the Wasm pool (docs/engines.md, the vLLM engine):
// what the scheduler calls, one core call per operation. Each request it
// serves gets a region of linear memory, its block table followed by the
// chained XXH3-128 keys of its blocks (the replay kernel's tokens, prompt
// and every output it will give, hashed once when the request is first
// looked up); regions are reused by later requests of a similar size. A
// request's state (blocks held, blocks cached, hits of its last lookup)
// sits in per-slot arrays, so the scheduler's many decode steps that need
// no block cost no call into the core.

import type { CoreInstance } from '../core/core-instance.js';
import { plainCore } from '../core/plain-core.js';
import { exhaustedDoing } from '../managers/core-manager.js';
import { GPU_SOURCE, type BlockRemovedEvent, type BlockStoredEvent } from '../managers/kv-events.js';
import { outputToken } from '../replay/kernel.js';
import { checkBool, checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { VllmBlockPool } from './block-pool.js';
import type { VllmKvCache, VllmKvFigures, VllmPrefixCacheStats } from './kv-cache.js';
import { VllmRequest } from './request.js';

export interface VllmKvCacheOptions {
  /** Blocks of the pool, the null block 0 included (at least 2). */
  numBlocks: number;
  /** Tokens per block. */
  blockSize: number;
  /** XXH3 seed of the chain keys (default 1024; ids, hits and evictions do not depend on it). */
  seed?: number;
  /** The dp rank its events say (default 0). */
  dpRank?: number;
  /** @internal Ranks of one engine share it: the id checksum over every rank's pops, in order. */
  sharedChecksum?: { h: number };
}

/** One of a manager's KV-cache events, in vLLM's order: a stored block when it is cached, a removed one when it is evicted. */
export type VllmKvEvent = BlockStoredEvent | BlockRemovedEvent;

const MIN_CLASS = 8;

/** Throws (naming `req`) unless it is a VllmRequest. */
function checkRequest(req: unknown): void {
  if (!(req instanceof VllmRequest)) throw new TypeError(`req must be a VllmRequest, got ${describe(req)}`);
}

export class VllmKvCacheManager implements VllmKvCache {
  readonly pool: VllmBlockPool;
  readonly blockSize: number;
  readonly dpRank: number;
  private readonly rt: CoreInstance;
  private readonly seedLo: number;
  private readonly seedHi: number;
  private readonly shared: { h: number } | null;
  // Per slot (a request's state while the manager serves it).
  private readonly owner: Array<VllmRequest | null> = [];
  private readonly region: number[] = [];
  private readonly sizeClass: number[] = [];
  private readonly cap: number[] = [];
  private readonly keysAt: number[] = [];
  private held = new Int32Array(64);
  private cached = new Int32Array(64);
  private lookedUp = new Int32Array(64);
  private readonly freeSlots: number[] = [];
  /** Regions given back, by size class (2^class bytes). */
  private readonly spare: number[][] = [];
  private calls = 0;
  private events: VllmKvEvent[] | null = null;
  // The lookups' counters (prefixCacheStats), as vLLM's get_computed_blocks records them.
  private lookups = 0;
  private queries = 0;
  private hitTokens = 0;
  private preemptedLookups = 0;
  private preemptedQueries = 0;
  private preemptedHits = 0;

  constructor(options: VllmKvCacheOptions) {
    checkObject('options', options);
    checkKeys('options', options, ['numBlocks', 'blockSize', 'seed', 'dpRank', 'sharedChecksum']);
    const numBlocks = checkInt('options.numBlocks', options.numBlocks, 2);
    this.blockSize = checkInt('options.blockSize', options.blockSize, 1);
    const seed = checkInt('options.seed', options.seed ?? 1024, 0, Number.MAX_SAFE_INTEGER);
    this.dpRank = checkInt('options.dpRank', options.dpRank ?? 0, 0);
    const shared = options.sharedChecksum;
    if (shared !== undefined) {
      checkObject('options.sharedChecksum', shared);
      checkInt('options.sharedChecksum.h', shared.h, 0, 0xffffffff);
    }
    this.seedLo = seed % 0x1_0000_0000;
    this.seedHi = Math.floor(seed / 0x1_0000_0000);
    this.shared = options.sharedChecksum ?? null;
    this.rt = plainCore();
    this.pool = new VllmBlockPool(numBlocks, this.rt);
  }

  numFreeBlocks(): number {
    return this.pool.numFreeBlocks();
  }

  /** Blocks a request can ever hold: its prompt and every output it may have. */
  private capOf(req: VllmRequest): number {
    return Math.ceil((req.promptLength + req.maxOutputs) / this.blockSize);
  }

  /** The slot of a request, made (its region and keys) on its first use; throws for a request another manager serves. */
  private slotOf(req: VllmRequest): number {
    const s = req.kvSlot;
    if (s >= 0) {
      if (this.owner[s] !== req) throw new RangeError(`kvpool: request ${req.index} is served by another KV-cache manager`);
      return s;
    }
    this.pool.live();
    const B = this.blockSize;
    const cap = this.capOf(req);
    const nKeys = Math.floor((req.promptLength + req.maxOutputs) / B);
    const tableBytes = (cap * 4 + 15) & ~15;
    const bytes = tableBytes + nKeys * 16;
    const c = Math.max(MIN_CLASS, Math.ceil(Math.log2(bytes)));
    const region = this.spare[c]?.pop() ?? this.rt.alloc(2 ** c);
    if (region === 0) throw new RangeError(exhaustedDoing(this.rt, `serving request ${req.index} (its blocks' table and keys)`, 2 ** c));
    const keysAt = region + tableBytes;
    try {
      this.hashKeys(req, keysAt);
    } catch (e) {
      (this.spare[c] ??= []).push(region);
      throw e;
    }
    const slot = this.freeSlots.pop() ?? this.owner.length;
    if (slot >= this.held.length) this.growSlots();
    this.owner[slot] = req;
    this.region[slot] = region;
    this.sizeClass[slot] = c;
    this.cap[slot] = cap;
    this.keysAt[slot] = keysAt;
    this.held[slot] = 0;
    this.cached[slot] = 0;
    this.lookedUp[slot] = -1;
    req.kvSlot = slot;
    return slot;
  }

  private growSlots(): void {
    const grow = (a: Int32Array) => {
      const b = new Int32Array(a.length * 2);
      b.set(a);
      return b;
    };
    this.held = grow(this.held);
    this.cached = grow(this.cached);
    this.lookedUp = grow(this.lookedUp);
  }

  /** The chain keys of the request's full blocks, prompt and outputs (docs/replay-kernel.md, tokens), to `out`. */
  private hashKeys(req: VllmRequest, out: number): void {
    const L = req.promptLength;
    const O = req.maxOutputs;
    const stg = this.rt.staging;
    const tokens = stg.byteSpace((L + O) * 4);
    const ids = stg.stageIds(req.trace.hashIds, 0, Math.ceil(L / 512));
    this.rt.ex.vp_request_keys(ids, L, outputToken(req.index, 0), O, this.blockSize, this.seedLo, this.seedHi, tokens, out);
  }

  computedBlocks(req: VllmRequest): number {
    checkRequest(req);
    const s = this.slotOf(req);
    const held = this.held[s]!;
    const max = Math.min(Math.floor((req.numTokens - 1) / this.blockSize), this.cap[s]! - held);
    const hits = max > 0 ? this.pool.lookup(this.keysAt[s]!, max, this.region[s]! + held * 4) : 0;
    this.lookedUp[s] = hits;
    if (req.numPreemptions === 0) {
      this.lookups++;
      this.queries += req.numTokens;
      this.hitTokens += hits * this.blockSize;
    } else {
      this.preemptedLookups++;
      this.preemptedQueries += req.numTokens;
      this.preemptedHits += hits * this.blockSize;
    }
    return hits;
  }

  /** Every lookup's tokens and hits so far, as vLLM's KVCacheManager records them (its PrefixCacheStats, never reset). */
  prefixCacheStats(): VllmPrefixCacheStats {
    this.pool.live();
    return {
      requests: this.lookups, queries: this.queries, hits: this.hitTokens,
      preemptedRequests: this.preemptedLookups, preemptedQueries: this.preemptedQueries, preemptedHits: this.preemptedHits,
    };
  }

  allocateSlots(req: VllmRequest, numNewTokens: number, hitBlocks: number, fullSequenceMustFit: boolean): boolean {
    checkRequest(req);
    if (!(numNewTokens >= 1 && (numNewTokens | 0) === numNewTokens && hitBlocks >= 0 && (hitBlocks | 0) === hitBlocks)) {
      throw new RangeError(`kvpool: allocateSlots of request ${req.index}: numNewTokens must be an integer >= 1 and hitBlocks one >= 0, got ${numNewTokens} and ${hitBlocks}`);
    }
    if (typeof fullSequenceMustFit !== 'boolean') checkBool('fullSequenceMustFit', fullSequenceMustFit);
    let s = req.kvSlot;
    // Everything that may refuse the call is checked before it counts or makes a slot (a lookup makes one).
    const fresh = s < 0 || this.owner[s] !== req;
    const B = this.blockSize;
    const lookedUp = fresh ? -1 : this.lookedUp[s]!;
    if (hitBlocks !== 0 && hitBlocks !== lookedUp) {
      throw new RangeError(`kvpool: allocateSlots of request ${req.index} with ${hitBlocks} hit blocks, but its last lookup found ${lookedUp}`);
    }
    const needSlots = req.numComputed + hitBlocks * B + numNewTokens;
    const need = Math.ceil(needSlots / B);
    if (!(need <= (fresh ? this.capOf(req) : this.cap[s]!))) {
      throw new RangeError(`kvpool: allocateSlots of request ${req.index}: ${numNewTokens} new tokens after ${needSlots - numNewTokens} is not within its ${req.promptLength + req.maxOutputs} tokens`);
    }
    if (fresh) s = this.slotOf(req);
    this.calls++;
    const held = this.held[s]!;
    if (hitBlocks === 0 && !fullSequenceMustFit && needSlots <= held * B) {
      // A decode step inside its last block, with no block newly full: vLLM's call changes nothing.
      const numTokens = req.numTokens;
      if ((needSlots < numTokens ? needSlots : numTokens) < (this.cached[s]! + 1) * B) return true;
    }
    const cacheTo = Math.floor(Math.min(needSlots, req.numTokens) / B);
    const cacheFrom = hitBlocks > 0 ? held + hitBlocks : this.cached[s]!;
    const mustFit = fullSequenceMustFit ? Math.ceil(req.numTokens / B) : 0;
    const table = this.region[s]!;
    const length = this.pool.allocate(table, this.cap[s]!, held, hitBlocks, need, mustFit, this.keysAt[s]!, cacheFrom, cacheTo);
    this.lookedUp[s] = -1;
    if (length < 0) return false;
    if (this.shared !== null) {
      const i32 = this.rt.i32;
      let h = this.shared.h;
      for (let b = held + hitBlocks; b < length; b++) h = (Math.imul(h, 31) + i32[(table >>> 2) + b]!) >>> 0;
      this.shared.h = h;
    }
    this.held[s] = length;
    this.cached[s] = Math.max(cacheFrom, cacheTo);
    if (this.events !== null) this.recordCall(req, s, cacheFrom, cacheTo);
    return true;
  }

  free(req: VllmRequest): void {
    checkRequest(req);
    const s = req.kvSlot;
    if (s < 0) return;
    if (this.owner[s] !== req) throw new RangeError(`kvpool: request ${req.index} is served by another KV-cache manager`);
    const held = this.held[s]!;
    if (held > 0) this.pool.free(this.region[s]!, held);
    this.held[s] = 0;
    this.cached[s] = 0;
    this.lookedUp[s] = -1;
  }

  release(req: VllmRequest): void {
    checkRequest(req);
    const s = req.kvSlot;
    if (s < 0) return;
    this.free(req);
    (this.spare[this.sizeClass[s]!] ??= []).push(this.region[s]!);
    this.owner[s] = null;
    this.freeSlots.push(s);
    req.kvSlot = -1;
  }

  /** The request's blocks, in logical order (a copy). */
  blocksOf(req: VllmRequest): Int32Array {
    checkRequest(req);
    const s = req.kvSlot;
    if (s < 0) return new Int32Array(0);
    this.slotOf(req);
    const at = this.region[s]! >>> 2;
    return this.rt.views().i32.slice(at, at + this.held[s]!);
  }

  /** The requests it holds blocks or keys for. */
  get numRequests(): number {
    return this.owner.length - this.freeSlots.length;
  }

  figures(): VllmKvFigures {
    const st = this.pool.stats();
    return {
      evictedBlocks: st.evictedBlocks,
      allocatedBlocks: st.allocatedBlocks,
      idChecksum: st.idChecksum,
      freeBlocksAtEnd: st.numFreeUncachedBlocks,
      cachedBlocksAtEnd: st.numCachedBlocks,
      cachedKeysAtEnd: st.numCachedKeys,
      allocateCalls: this.calls,
    };
  }

  /** The pool's audit, then: every block's references are exactly the requests' tables holding it. */
  check(): void {
    this.pool.live();
    const counts = new Int32Array(this.pool.numBlocks);
    const i32 = this.rt.views().i32;
    for (let s = 0; s < this.owner.length; s++) {
      if (this.owner[s] === null || this.owner[s] === undefined) continue;
      const at = this.region[s]! >>> 2;
      for (let b = 0; b < this.held[s]!; b++) {
        const id = i32[at + b]!;
        if (!(id > 0 && id < counts.length)) throw new Error(`kvpool: vLLM KV-cache audit failed: request ${this.owner[s]!.index} holds ${id}, not a block of its pool`);
        counts[id]!++;
      }
      if (this.cached[s]! > Math.max(this.held[s]!, 0) || this.cached[s]! < 0) throw new Error(`kvpool: vLLM KV-cache audit failed: request ${this.owner[s]!.index} counts ${this.cached[s]} cached blocks of ${this.held[s]}`);
    }
    this.pool.check(counts);
  }

  /**
   * Starts (true) or stops recording KV-cache events in vLLM's order: a
   * block stored when it is cached (its key, its parent's, its tokens), a
   * block removed when a pop evicts it. Stopping forgets what was not drained.
   */
  recordEvents(on: boolean): void {
    checkBool('on', on);
    this.pool.recordEvictions(on);
    this.events = on ? [] : null;
  }

  /** The events recorded since the last drain, oldest first, and forgets them. */
  drainEvents(): VllmKvEvent[] {
    this.pool.live();
    const out = this.events ?? [];
    if (this.events !== null) this.events = [];
    return out;
  }

  /** The call's evictions (in pop order), then the blocks it cached. */
  private recordCall(req: VllmRequest, s: number, from: number, to: number): void {
    const events = this.events!;
    const { medium, group } = GPU_SOURCE;
    for (const e of this.pool.drainEvictions()) events.push({ type: 'removed', dpRank: this.dpRank, blockId: e.blockId, hash: e.key, medium, group });
    const { i32, u8 } = this.rt.views();
    const B = this.blockSize;
    const L = req.promptLength;
    const ids = req.trace.hashIds;
    for (let b = from; b < to; b++) {
      const k = this.keysAt[s]! + b * 16;
      const tokenIds = new Int32Array(B);
      for (let j = 0; j < B; j++) {
        const t = b * B + j;
        tokenIds[j] = t < L ? ids[t >> 9]! * 512 + (t & 511) : outputToken(req.index, t - L);
      }
      events.push({
        type: 'stored', dpRank: this.dpRank, blockId: i32[(this.region[s]! >>> 2) + b]!, hash: u8.slice(k, k + 16),
        parentHash: b > 0 ? u8.slice(k - 16, k) : null, tokenIds, salt: null, medium, group,
      });
    }
  }

  /** Gives every region and the pool back; later calls throw. */
  dispose(): void {
    if (this.pool.isDisposed) return;
    for (let s = 0; s < this.owner.length; s++) if (this.owner[s]) {
      this.rt.release(this.region[s]!);
      this.owner[s]!.kvSlot = -1;
      this.owner[s] = null;
    }
    for (const list of this.spare) if (list) for (const r of list) this.rt.release(r);
    this.spare.length = 0;
    this.pool.dispose();
  }
}
