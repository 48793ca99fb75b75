// What every core-backed manager shares: one region of the Wasm core (free
// stack, reference counts, and with caching on the hash table and eviction
// order), reached through the raw exports. The pool's hot paths use the
// `*Into`/`*From` methods, which write into caller-owned arrays and cross
// the boundary once per call.

import {
  ERR_TOKENS_MISSING, ERR_UNSTAMPED_PARENT, FLAG_CACHED, HDR_GEN, MATCH_COUNT, MATCH_TOUCH, MAX_PAGES, META_SIZE, PARENT_SALT_ROOT, STAT_COUNT,
} from '../core/abi.js';

/** 32-bit words per id record (caching on): an id's stamp is this many words after the last id's. */
const META_WORDS = META_SIZE / 4;

/** Bytes of the largest linear memory. */
const MAX_MEMORY_BYTES = MAX_PAGES * 65536;
import { CHECK_MESSAGES, STAT_FIELDS } from '../core/abi-names.js';
import type { CoreInstance } from '../core/core-instance.js';
import type { CoreExports } from '../core/exports.js';
import { loadCore, plainCore } from '../core/plain-core.js';
import type { Staging } from '../core/staging.js';
import { copyInt32, type MemViews } from '../core/views.js';
import { checkBool, checkInt, checkInt32Array, describe } from '../validate.js';
import type { BlockManagerStats } from './block-manager.js';
import { BlockState } from './block-state.js';
import { throwIdError } from './core-errors.js';
import {
  decodeEvents, GPU_SOURCE, parseRecordOptions, type KVEvent, type KVEventRecordVisitor, type KVEventSource, type RecordEventsOptions, type SaltNames,
} from './kv-events.js';

/** What stored events say of blocks cached by hash (insertHashesFrom): per block, parent kind (EV_PARENT_*), parent hash, tokens. */
export interface BlocksAnnounced {
  parentKinds: Int32Array;
  /** 16 bytes per block. */
  parents: Uint8Array;
  /** blockSize tokens per block. */
  tokens: Int32Array;
}

/** Blocks staged per core call when matching (see matchInto). */
const MATCH_WINDOW = 8;

export interface CoreManagerConfig {
  numBlocks: number;
  blockSize: number;
  prefixOn: boolean;
  seedLo: number;
  seedHi: number;
  /** The core instance to make the manager in (default: the class's, see coreRuntime). */
  rt?: CoreInstance;
}

/**
 * A handle on one object of the core (a manager region). It knows the core
 * instance the object lives in and goes through it for every read and write
 * of linear memory; once disposed, every call on it throws instead of
 * reaching memory that may belong to another object by then.
 */
export abstract class CoreManager {
  /** Physical ids, padding id 0 included. */
  readonly numBlocks: number;
  /** Tokens per block. */
  readonly blockSize: number;
  /** @internal header pointer of this manager in the core (unsigned) */
  readonly ptr: number;
  /** @internal the header's generation: tells this manager from a later one in the same header slot */
  readonly gen: number;
  /** @internal */
  readonly seedLo: number;
  /** @internal */
  readonly seedHi: number;
  /** @internal the core instance this manager runs on */
  readonly rt: CoreInstance;
  /** @internal its raw exports */
  protected readonly ex: CoreExports;
  /** @internal its memory views (refreshed in place) */
  protected readonly mem: MemViews;
  /** @internal its staging areas */
  protected readonly stg: Staging;
  private disposed = false;
  /** Recording events: core calls that cache or evict may then grow memory (views refreshed after them). */
  private recording = false;
  /** Whether the recording keeps what each stored event said (snapshots); null before recording ever started. */
  private snapshots: boolean | null = null;

  protected constructor(cfg: CoreManagerConfig) {
    this.numBlocks = cfg.numBlocks;
    this.blockSize = cfg.blockSize;
    this.seedLo = cfg.seedLo;
    this.seedHi = cfg.seedHi;
    this.rt = cfg.rt ?? this.coreRuntime();
    this.ex = this.rt.ex;
    this.mem = this.rt;
    this.stg = this.rt.staging;
    this.ptr = this.createRegion(cfg) >>> 0;
    this.gen = Atomics.load(this.rt.u32, (this.ptr + HDR_GEN) >>> 2);
  }

  /** @internal Which core instance managers of this class run on (hook for the shared-memory build). */
  protected coreRuntime(): CoreInstance {
    return plainCore();
  }

  /** @internal Creates the manager's region in the core; returns its header pointer. */
  protected createRegion(cfg: CoreManagerConfig): number {
    this.rt.live();
    const ptr = this.rt.growing((e) => e.mgr_create(cfg.numBlocks, cfg.blockSize, cfg.prefixOn ? 1 : 0, cfg.seedLo, cfg.seedHi));
    if (ptr === 0) throw new RangeError(exhausted(this.rt, cfg.numBlocks, cfg.prefixOn));
    return ptr;
  }

  /** Resolves once the Wasm core is loaded (constructors are synchronous after that). */
  static ready(): Promise<void> {
    return loadCore();
  }

  allocate(n: number): Int32Array | null {
    this.live();
    checkInt('n', n);
    if (n >= this.numBlocks) return this.allocateImpossible(n);
    const out = this.stg.idSpace(n);
    const code = this.ex.mgr_allocate(this.ptr, n, out);
    if (this.recording) this.rt.views();
    if (code < 0) return null;
    return copyInt32(this.mem.i32, out >>> 2, n);
  }

  deallocate(ids: ArrayLike<number>): void {
    this.live();
    const list = checkInt32Array('ids', ids);
    const p = this.stg.stageIds(list);
    const code = this.ex.mgr_release(this.ptr, p, list.length);
    if (code < 0) throwIdError(code, 'ids', list, 0, this.numBlocks, this.ex);
  }

  retain(ids: ArrayLike<number>): void {
    this.live();
    const list = checkInt32Array('ids', ids);
    const p = this.stg.stageIds(list);
    const code = this.ex.mgr_retain(this.ptr, p, list.length);
    if (code < 0) throwIdError(code, 'ids', list, 0, this.numBlocks, this.ex);
  }

  evict(n: number): number {
    this.live();
    checkInt('n', n);
    const done = this.ex.mgr_evict(this.ptr, n);
    if (this.recording) this.rt.views();
    return done;
  }

  /**
   * Evicts every cached block nothing else holds (the reference's
   * reset_prefix_cache); returns how many. With events on, emptying the whole
   * cache records one "cleared" event instead of a removal per block.
   */
  resetPrefixCache(): number {
    this.live();
    const done = this.ex.mgr_evict_all(this.ptr);
    if (this.recording) this.rt.views();
    return done;
  }

  /**
   * Starts (true) or stops recording KV-cache events (off by default). Starting
   * assumes a consumer that knows nothing yet: blocks already cached are never
   * removed in an event, nor put in a snapshot, since none announced them.
   * With `{ snapshots: true }`, recording keeps per block what announced it
   * (for snapshotEvents): a RangeError when memory for that runs out, and
   * nothing changes.
   * Already recording, the options must be the same (stop first to change them).
   */
  recordEvents(on: boolean, options?: RecordEventsOptions): void {
    this.live();
    checkBool('on', on);
    const snapshots = parseRecordOptions(options);
    if (on && this.recording && options !== undefined && snapshots !== this.snapshots) {
      throw new RangeError(`kvpool: events are recorded ${this.snapshots ? 'with' : 'without'} snapshots already; stop recording to change that`);
    }
    if (on && this.recording) return;
    // Starting allocates the mirror, which may grow memory.
    if (this.rt.growing((e) => e.mgr_events_record(this.ptr, on ? 1 : 0, snapshots ? 1 : 0)) < 0) {
      throw new RangeError(`kvpool: no Wasm memory left to record events on a manager of ${this.numBlocks} blocks`);
    }
    if (on) this.snapshots = snapshots;
    this.recording = on;
  }

  /** True while events are recorded. */
  get recordingEvents(): boolean {
    this.live();
    return this.recording;
  }

  /** The events recorded since the last drain, oldest first, and forgets them. */
  drainEvents(dpRank = 0, out: KVEvent[] = []): KVEvent[] {
    this.live();
    checkInt('dpRank', dpRank);
    this.drainEventsAs(dpRank, GPU_SOURCE, null, out);
    return out;
  }

  /**
   * The stored events that announce this manager's cache again, each block
   * after its cached parent: a consumer that starts from nothing and applies
   * them knows every block announced since recording started and still
   * cached. Pending events stay pending (drainEvents still returns them).
   */
  snapshotEvents(dpRank = 0): KVEvent[] {
    this.live();
    checkInt('dpRank', dpRank);
    const out: KVEvent[] = [];
    this.snapshotEventRecords(GPU_SOURCE, (src, rt, ptr, len) => decodeEvents(rt.views(), ptr, len, dpRank, src, null, out));
    return out;
  }

  /** @internal drainEvents with the source and the salts to name them with. */
  drainEventsAs(dpRank: number, source: KVEventSource, salts: SaltNames | null, out: KVEvent[]): void {
    this.drainEventRecords(source, (src, rt, ptr, len) => decodeEvents(rt.views(), ptr, len, dpRank, src, salts, out));
  }

  /** @internal Hands the raw records to `visit` (if any), then forgets them. */
  drainEventRecords(source: KVEventSource, visit: KVEventRecordVisitor): void {
    this.live();
    const e = this.ex;
    const len = e.mgr_events_len(this.ptr);
    if (len < 0) {
      e.mgr_events_clear(this.ptr);
      throw new RangeError('kvpool: KV-cache events were lost: Wasm memory ran out, or more than 1 GiB of records waited to be drained');
    }
    if (len === 0) return;
    try {
      visit(source, this.rt, e.mgr_events_ptr(this.ptr) >>> 0, len);
    } finally {
      e.mgr_events_clear(this.ptr);
    }
  }

  /** @internal Hands `visit` the records of a snapshot (see snapshotEvents); pending records stay. */
  snapshotEventRecords(source: KVEventSource, visit: KVEventRecordVisitor): void {
    this.live();
    if (this.snapshots !== true) {
      throw new RangeError('kvpool: snapshots need recording with them: recordEvents(true, { snapshots: true })');
    }
    const e = this.ex;
    const before = e.mgr_events_len(this.ptr);
    if (before < 0) throw new RangeError('kvpool: KV-cache events were lost: drain them before taking a snapshot');
    const n = this.rt.growing((x) => x.mgr_events_snapshot(this.ptr));
    if (n < 0) {
      e.mgr_events_rewind(this.ptr, before);
      throw new RangeError('kvpool: no Wasm memory left for a snapshot of the events');
    }
    try {
      if (n > 0) visit(source, this.rt, (e.mgr_events_ptr(this.ptr) >>> 0) + before, n);
    } finally {
      e.mgr_events_rewind(this.ptr, before);
    }
  }

  numFreeBlocks(): number {
    this.live();
    return this.ex.mgr_num_free(this.ptr);
  }

  numUsedBlocks(): number {
    this.live();
    return this.ex.mgr_num_used(this.ptr);
  }

  numBlocksInPrefixCache(): number {
    this.live();
    return this.ex.mgr_num_cached(this.ptr);
  }

  numTotalBlocks(): number {
    this.live();
    return this.numBlocks - 1;
  }

  /** used / total; 0 for a manager that holds only its padding block. */
  kvCacheUtilization(): number {
    const total = this.numTotalBlocks();
    return total === 0 ? 0 : this.numUsedBlocks() / total;
  }

  stats(): BlockManagerStats {
    this.live();
    const out = this.stg.byteSpace(STAT_COUNT * 8);
    this.ex.mgr_stats(this.ptr, out);
    const f = this.mem.f64;
    const base = out >>> 3;
    const s = {} as Record<(typeof STAT_FIELDS)[number], number>;
    STAT_FIELDS.forEach((k, i) => (s[k] = f[base + i]!));
    return s;
  }

  check(): void {
    this.live();
    const code = this.ex.mgr_check(this.ptr);
    if (code !== 0) {
      const id = this.ex.mgr_error_index();
      const msg = CHECK_MESSAGES[code] ?? `code ${code}`;
      throw new Error(`kvpool: manager state is inconsistent: ${msg}${id >= 0 ? ` (id ${id})` : ''}`);
    }
  }

  /** References held on `id` right now, the prefix cache's included. */
  refCount(id: number): number {
    this.live();
    checkInt('id', id, 0, this.numBlocks - 1);
    return this.ex.mgr_ref(this.ptr, id);
  }

  /** The 16-byte chain hash stamped on `id` by a match or insert, or null when it has none. */
  blockHash(id: number): Uint8Array | null {
    this.live();
    checkInt('id', id, 0, this.numBlocks - 1);
    const out = this.stg.byteSpace(16);
    if (this.ex.mgr_block_hash(this.ptr, id, out) === 0) return null;
    return this.mem.u8.slice(out, out + 16);
  }

  /**
   * Holders of every id other than the prefix cache (index = id; id 0, the
   * padding block, counts the manager itself). For audits.
   */
  holderCounts(): Int32Array {
    this.live();
    const e = this.ex;
    const v = this.rt.views();
    const refs = e.mgr_refs_ptr(this.ptr) >>> 2;
    const words = e.mgr_refs_stride(this.ptr) >>> 2;
    const flags = e.mgr_flags_ptr(this.ptr) >>> 0;
    const out = new Int32Array(this.numBlocks);
    for (let id = 0; id < this.numBlocks; id++) out[id] = v.i32[refs + id * words]! - (v.u8[flags + id]! & FLAG_CACHED);
    return out;
  }

  /**
   * The state of every id in one pass over the core's records (index = id):
   * a `BlockState` code. Written into `out` when given (length >= numBlocks),
   * so a view can poll it every frame without allocating.
   */
  blockStates(out?: Uint8Array): Uint8Array {
    this.live();
    const n = this.numBlocks;
    if (out !== undefined && (!(out instanceof Uint8Array) || out.length < n)) {
      const got = out instanceof Uint8Array ? `one of length ${out.length}` : describe(out);
      throw new TypeError(`out must be a Uint8Array of length >= ${n}, got ${got}`);
    }
    const dst = out ?? new Uint8Array(n);
    const e = this.ex;
    const v = this.rt.views();
    const i32 = v.i32;
    const u8 = v.u8;
    const refs = e.mgr_refs_ptr(this.ptr) >>> 2;
    const words = e.mgr_refs_stride(this.ptr) >>> 2;
    const flags = e.mgr_flags_ptr(this.ptr) >>> 0;
    dst[0] = BlockState.Padding;
    for (let id = 1; id < n; id++) {
      const cached = u8[flags + id]! & FLAG_CACHED;
      const holders = i32[refs + id * words]! - cached;
      dst[id] = holders > 1 ? BlockState.Shared : holders === 1 ? BlockState.Held : cached ? BlockState.Cached : BlockState.Free;
    }
    return dst;
  }

  /** A copy of the free stack, bottom first (the last element is handed out next). */
  freeIds(): Int32Array {
    this.live();
    const v = this.rt.views();
    const p = this.ex.mgr_free_ptr(this.ptr) >>> 2;
    return v.i32.slice(p, p + this.numFreeBlocks());
  }

  /**
   * Cached ids from least to most recently used: the order eviction walks
   * (skipping ids something else still holds). Under a non-LRU eviction
   * policy, ordered by the policy's key first, recency among equal keys.
   * O(n log n); for audits and views.
   */
  lruOrder(): Int32Array {
    this.live();
    const e = this.ex;
    const v = this.rt.views();
    const stampsAt = e.mgr_stamps_ptr(this.ptr) >>> 2;
    const flags = e.mgr_flags_ptr(this.ptr) >>> 0;
    const keysAt = e.mgr_keys_ptr(this.ptr) >>> 2;
    const keyed = e.mgr_policy(this.ptr) !== 0; // keys are unused (stale) under LRU
    const ids: number[] = [];
    const stamps: number[] = [];
    const keys: number[] = [];
    for (let id = 1; id < this.numBlocks; id++) {
      if ((v.u8[flags + id]! & FLAG_CACHED) === 0) continue;
      ids.push(id);
      stamps[id] = v.u32[stampsAt + id * META_WORDS]!;
      keys[id] = keyed ? v.u32[keysAt + id]! : 0;
    }
    ids.sort((a, b) => keys[a]! - keys[b]! || stamps[a]! - stamps[b]!);
    return Int32Array.from(ids);
  }

  /** Gives the manager's memory back to the core. The manager is unusable afterwards: every call throws. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.recording = false;
    if (!this.rt.isClosed) this.rt.growing((e) => e.mgr_destroy(this.ptr));
  }

  /** True once `dispose()` ran. */
  get isDisposed(): boolean {
    return this.disposed;
  }

  /** @internal Throws when the manager was disposed (every call starts here). */
  live(): void {
    if (this.disposed) throw new Error(`kvpool: this ${this.publicName} was disposed; it cannot be used any more`);
  }

  /** The class a user knows this manager by (a region inside another object names that object). */
  protected get publicName(): string {
    return this.constructor.name;
  }

  /** @internal Throws unless `other` lives in the same core instance (a call that hands the core both headers). */
  sameCore(other: CoreManager, name: string): void {
    this.live();
    other.live();
    if (other.rt !== this.rt) throw new TypeError(`kvpool: ${name} belongs to another core instance than this ${this.constructor.name}`);
  }

  /**
   * An allocation of `n` >= numBlocks ids, which can never succeed: the core
   * still evicts what it can on the way (a failed allocation keeps its
   * evictions, as the reference's does), but nothing is staged for ids it
   * will never write.
   */
  private allocateImpossible(n: number): null {
    this.ex.mgr_allocate(this.ptr, n, 0);
    if (this.recording) this.rt.views();
    return null;
  }

  // ---- hot paths for the pool (arguments already validated) ----

  /** @internal Pops `n` ids into `dst[at..]`; false (nothing popped) when short. */
  allocateInto(n: number, dst: Int32Array, at: number): boolean {
    this.live();
    if (n >= this.numBlocks) return this.allocateImpossible(n) !== null;
    const out = this.stg.idSpace(n);
    const code = this.ex.mgr_allocate(this.ptr, n, out);
    if (this.recording) this.rt.views();
    if (code < 0) return false;
    const i32 = this.mem.i32;
    const base = out >>> 2;
    if (n <= 8) for (let i = 0; i < n; i++) dst[at + i] = i32[base + i]!;
    else dst.set(i32.subarray(base, base + n), at);
    return true;
  }

  /**
   * @internal allocateInto(1, ...) `k` times in a row, the ids to
   * dst[at..] in step order, in one core call; stops at the first that
   * fails (made and failed, as that call would be). Returns how many
   * succeeded, or -1 when this manager makes them one call at a time.
   */
  allocateStepsInto(k: number, dst: Int32Array, at: number): number {
    this.live();
    // Past numBlocks - 1 steps one fails for sure, and the run stops there:
    // a larger count stages room for ids it never writes.
    const n = Math.min(k, this.numBlocks);
    const out = this.stg.idSpace(n);
    const got = this.ex.mgr_allocate_steps(this.ptr, n, out);
    if (this.recording) this.rt.views();
    const i32 = this.mem.i32;
    const base = out >>> 2;
    if (got <= 8) for (let i = 0; i < got; i++) dst[at + i] = i32[base + i]!;
    else dst.set(i32.subarray(base, base + got), at);
    return got;
  }

  /** @internal Drops one reference on each of `ids[start..end)`; returns the core's code. */
  releaseFrom(ids: Int32Array, start: number, end: number): number {
    this.live();
    if (end <= start) return 0;
    const p = this.stg.stageIds(ids, start, end);
    return this.ex.mgr_release(this.ptr, p, end - start);
  }

  /** @internal Adds one reference to each of `ids[start..end)`. */
  retainFrom(ids: Int32Array, start: number, end: number): number {
    this.live();
    if (end <= start) return 0;
    const p = this.stg.stageIds(ids, start, end);
    return this.ex.mgr_retain(this.ptr, p, end - start);
  }

  /**
   * @internal Matches blocks `first..first+nBlocks` of `tokens`, chained on the
   * hash stamped on `parentId` (0: the chain starts at block `first` = 0).
   * Writes hit ids to `dst[at..]`; returns the number of hits.
   */
  matchInto(
    tokens: ArrayLike<number>, first: number, nBlocks: number, parentId: number, dst: Int32Array, at: number,
    salt: Uint8Array | null = null,
  ): number {
    this.live();
    if (nBlocks <= 0) return 0;
    // Most matches stop within a few blocks, so tokens are staged a window at
    // a time (8 blocks, then 4x larger each time), going on only while a whole
    // window hit. The LRU update is deferred to one re-append over all hits,
    // as a single walk would do.
    // The windows write their hits one after another into the id area,
    // where the touch reads them: sized for every block first, no window
    // moves it.
    const ids = this.stg.idSpace(nBlocks);
    if (nBlocks <= MATCH_WINDOW) return this.matchWindow(tokens, first, nBlocks, parentId, dst, at, MATCH_TOUCH | MATCH_COUNT, nBlocks, salt, ids);
    let hits = 0;
    let parent = parentId;
    let window = MATCH_WINDOW;
    while (hits < nBlocks) {
      const n = Math.min(window, nBlocks - hits);
      const h = this.matchWindow(tokens, first + hits, n, parent, dst, at + hits, hits === 0 ? MATCH_COUNT : 0, nBlocks, salt, ids + hits * 4);
      hits += h;
      if (h < n) break;
      parent = dst[at + hits - 1]!;
      window *= 4;
    }
    if (hits > 0) this.ex.mgr_touch_reversed(this.ptr, ids, hits);
    return hits;
  }

  /** One window of matchInto: hits to `out` (id area) and to dst[at..]; MATCH_* `flags`. */
  private matchWindow(
    tokens: ArrayLike<number>,
    first: number,
    nBlocks: number,
    parentId: number,
    dst: Int32Array,
    at: number,
    flags: number,
    queried: number,
    salt: Uint8Array | null,
    out: number,
  ): number {
    const e = this.ex;
    const B = this.blockSize;
    let tok = this.stg.stageTokens(tokens, first * B, (first + nBlocks) * B);
    let hits = e.mgr_match(this.ptr, tok, nBlocks, parentId, first === 0 ? this.stageSalt(salt) : 0, out, flags, queried);
    if (hits === ERR_UNSTAMPED_PARENT) {
      const parent = this.parentFromTokens(tokens, first, salt);
      tok = this.stg.stageTokens(tokens, first * B, (first + nBlocks) * B);
      hits = e.mgr_match(this.ptr, tok, nBlocks, 0, parent, out, flags, queried);
    }
    const i32 = this.mem.i32;
    const base = out >>> 2;
    for (let i = 0; i < hits; i++) dst[at + i] = i32[base + i]!;
    return hits;
  }

  /**
   * @internal Caches blocks `first..first+nBlocks` of `tokens` held in
   * `ids[first..]`, chained on `parentId`'s hash. Returns new entries or a
   * negative core code (bad id). `known`: how many leading blocks carry, on
   * their ids, the hash these tokens give (the caller stamped them), so the
   * core takes those keys as they are.
   */
  insertFrom(
    tokens: ArrayLike<number>, ids: ArrayLike<number>, first: number, nBlocks: number, parentId: number,
    salt: Uint8Array | null = null, known = 0,
  ): number {
    this.live();
    if (nBlocks <= 0) return 0;
    const e = this.ex;
    const B = this.blockSize;
    // Known blocks carry their keys: their tokens are not staged (a stored
    // event needs them, so not while recording). Should a known block lack
    // its stamp after all, the core says so and everything is staged.
    let staged = this.recording ? 0 : Math.min(known, nBlocks);
    let idp = this.stg.stageIds(ids, first, first + nBlocks);
    let tok = this.stg.stageTokens(tokens, (first + staged) * B, (first + nBlocks) * B);
    // Block 0 of a salted sequence is chained on the salt's digest (its stored event says so).
    const root = first === 0 && salt !== null;
    const pid = root ? PARENT_SALT_ROOT : parentId;
    let r = e.mgr_insert(this.ptr, tok, idp, nBlocks, pid, root ? this.stageSalt(salt) : 0, known, staged);
    if (r === ERR_TOKENS_MISSING) {
      staged = 0;
      tok = this.stg.stageTokens(tokens, first * B, (first + nBlocks) * B);
      r = e.mgr_insert(this.ptr, tok, idp, nBlocks, pid, root ? this.stageSalt(salt) : 0, known, 0);
    }
    if (r === ERR_UNSTAMPED_PARENT) {
      const parent = this.parentFromTokens(tokens, first, salt);
      idp = this.stg.stageIds(ids, first, first + nBlocks);
      tok = this.stg.stageTokens(tokens, (first + staged) * B, (first + nBlocks) * B);
      r = e.mgr_insert(this.ptr, tok, idp, nBlocks, 0, parent, known, staged);
    }
    if (this.recording) this.rt.views();
    return r;
  }

  /**
   * @internal Stamps on `ids[first..first+nBlocks)` the chain hashes of the
   * same blocks of `tokens` (chained on `parentId`'s hash, or the salt for
   * block 0), so that a later insertFrom of them takes them as known.
   * Returns 0 or a negative core code (an id nothing holds).
   */
  stampChainFrom(
    tokens: ArrayLike<number>, ids: ArrayLike<number>, first: number, nBlocks: number, parentId: number, salt: Uint8Array | null = null,
  ): number {
    this.live();
    if (nBlocks <= 0) return 0;
    const e = this.ex;
    const B = this.blockSize;
    let idp = this.stg.stageIds(ids, first, first + nBlocks);
    let tok = this.stg.stageTokens(tokens, first * B, (first + nBlocks) * B);
    let r = e.mgr_stamp_chain(this.ptr, tok, idp, nBlocks, parentId, first === 0 ? this.stageSalt(salt) : 0);
    if (r === ERR_UNSTAMPED_PARENT) {
      const parent = this.parentFromTokens(tokens, first, salt);
      idp = this.stg.stageIds(ids, first, first + nBlocks);
      tok = this.stg.stageTokens(tokens, first * B, (first + nBlocks) * B);
      r = e.mgr_stamp_chain(this.ptr, tok, idp, nBlocks, 0, parent);
    }
    return r;
  }

  /**
   * @internal Caches `ids[start..end)` under the 16-byte hashes in
   * `hashes[16*hashAt ..]` (insert by stamped hash). Returns new entries or a
   * negative core code (bad id).
   */
  insertHashesFrom(ids: Int32Array, start: number, end: number, hashes: Uint8Array, hashAt: number, about?: BlocksAnnounced): number {
    this.live();
    const n = end - start;
    if (n <= 0) return 0;
    const B = this.blockSize;
    const record = about !== undefined && this.recording;
    // One byte area: hashes, then (recording) each block's parent record and its tokens.
    const hp = this.stg.byteSpace(n * 16 + (record ? n * (20 + 4 * B) : 0));
    const u8 = this.mem.u8;
    u8.set(hashes.subarray(hashAt * 16, (hashAt + n) * 16), hp);
    let tp = 0;
    let pp = 0;
    if (record) {
      pp = hp + n * 16;
      tp = pp + n * 20;
      const dv = new DataView(u8.buffer, u8.byteOffset);
      for (let i = 0; i < n; i++) {
        dv.setInt32(pp + i * 20, about.parentKinds[i]!, true);
        u8.set(about.parents.subarray(i * 16, i * 16 + 16), pp + i * 20 + 4);
      }
      this.mem.i32.set(about.tokens.subarray(0, n * B), tp >>> 2);
    }
    const idp = this.stg.stageIds(ids, start, end);
    const r = this.ex.mgr_insert_hashes(this.ptr, idp, hp, n, tp, pp);
    if (this.recording) this.rt.views();
    return r;
  }

  /**
   * @internal The host tier's offload choice over pairs (devIds[i], hostIds[i]),
   * i in [from, end): a pair whose device block only the sequence and the
   * cache hold (two references, cached) moves to out*[at..] with the block's
   * stamped hash (16 bytes each at 16*at); the other pairs keep their order
   * from `from` on. Returns how many moved.
   */
  offloadPickInto(
    devIds: Int32Array, hostIds: Int32Array, from: number, end: number,
    outDev: Int32Array, outHost: Int32Array, outHashes: Uint8Array, at: number,
  ): number {
    this.live();
    const n = end - from;
    if (n <= 0) return 0;
    const p = this.stg.byteSpace(n * 32);
    const i32 = this.mem.i32;
    const q = p >>> 2;
    i32.set(devIds.subarray(from, end), q);
    i32.set(hostIds.subarray(from, end), q + n);
    const moved = this.ex.mgr_offload_pick(this.ptr, p, p + 4 * n, n, p + 8 * n, p + 12 * n, p + 16 * n);
    const kept = n - moved;
    devIds.set(i32.subarray(q, q + kept), from);
    hostIds.set(i32.subarray(q + n, q + n + kept), from);
    outDev.set(i32.subarray(q + 2 * n, q + 2 * n + moved), at);
    outHost.set(i32.subarray(q + 3 * n, q + 3 * n + moved), at);
    outHashes.set(this.mem.u8.subarray(p + 16 * n, p + 16 * n + 16 * moved), 16 * at);
    return moved;
  }

  /**
   * @internal A load plan's hashes: the hashes stamped on `src`'s ids
   * srcIds[from..from+n) go to out[16*at..] and are stamped on this
   * manager's ids dstIds[from..from+n) (a cached one keeps its key), so a
   * later insertFrom takes the loaded blocks as known. Returns how many
   * leading destination ids carry their source's hash, or a negative core
   * code (an id out of range, a destination nothing holds).
   */
  stampLoadedInto(src: CoreManager, srcIds: Int32Array, dstIds: Int32Array, from: number, n: number, out: Uint8Array, at: number): number {
    this.sameCore(src, 'the source manager');
    if (n <= 0) return 0;
    const p = this.stg.byteSpace(n * 24);
    const i32 = this.mem.i32;
    const q = p >>> 2;
    i32.set(srcIds.subarray(from, from + n), q);
    i32.set(dstIds.subarray(from, from + n), q + n);
    const r = this.ex.mgr_stamp_loaded(this.ptr, src.ptr, p, p + 4 * n, n, p + 8 * n);
    if (r >= 0) out.set(this.mem.u8.subarray(p + 8 * n, p + 24 * n), at * 16);
    return r;
  }

  /**
   * @internal The host tier's release of a finished sequence whose offload
   * completes at once (the replay's worker), in one core call: this is the
   * device manager, `devIds[0..nDev)` the sequence's device table,
   * `hostIds[0..heldHost)` its host table, `cachedHost` and `cachedDev` its
   * computed blocks on each tier. Neither manager may record events.
   * Returns the blocks offloaded, or a negative core code.
   */
  releaseOffloadNow(
    host: CoreManager, devIds: Int32Array, nDev: number, hostIds: Int32Array | null, heldHost: number, cachedHost: number, cachedDev: number,
  ): number {
    this.sameCore(host, 'the host manager');
    const hostRoom = Math.max(heldHost, cachedDev);
    const p = this.stg.byteSpace(4 * (nDev + hostRoom) + 20 * cachedDev);
    const i32 = this.mem.i32;
    const q = p >>> 2;
    i32.set(devIds.subarray(0, nDev), q);
    if (hostIds !== null) i32.set(hostIds.subarray(0, heldHost), q + nDev);
    const hp = p + 4 * nDev;
    return this.ex.tier_release_offload(this.ptr, host.ptr, p, nDev, hp, heldHost, cachedHost, cachedDev, hp + 4 * hostRoom);
  }

  /** @internal Prefix hits a match of blocks `0..nBlocks` of `tokens` would find; changes nothing. */
  peekMatches(tokens: ArrayLike<number>, nBlocks: number, salt: Uint8Array | null = null): number {
    this.live();
    if (nBlocks <= 0) return 0;
    const tok = this.stg.stageTokens(tokens, 0, nBlocks * this.blockSize);
    return this.ex.mgr_peek(this.ptr, tok, nBlocks, this.stageSalt(salt));
  }

  /** @internal Copies the hash stamped on `id` to `out[at..at+16)`; false when it has none. */
  blockHashInto(id: number, out: Uint8Array, at: number): boolean {
    this.live();
    const p = this.stg.byteSpace(16);
    if (this.ex.mgr_block_hash(this.ptr, id, p) === 0) return false;
    out.set(this.mem.u8.subarray(p, p + 16), at);
    return true;
  }

  /** @internal True when `id` is a prefix-cache entry. */
  isCachedId(id: number): boolean {
    this.live();
    return this.ex.mgr_is_cached(this.ptr, id) === 1;
  }

  /** The chain hash of block `first - 1`, computed from the tokens (in the byte area). */
  private parentFromTokens(tokens: ArrayLike<number>, first: number, salt: Uint8Array | null): number {
    const B = this.blockSize;
    const tok = this.stg.stageTokens(tokens, 0, first * B);
    // The salt's digest (if any) sits in front of the hashes, in the same area.
    const area = this.stg.byteSpace(16 + first * 16);
    const out = area + 16;
    let parent = 0;
    if (salt !== null) {
      this.mem.u8.set(salt, area);
      parent = area;
    }
    this.ex.hash_blocks_from(tok, first * B, B, this.seedLo, this.seedHi, parent, out);
    return out + (first - 1) * 16;
  }

  /**
   * Puts a cache salt's 16-byte digest in the byte area; returns its pointer,
   * the parent hash of block 0 (0 without a salt: block 0 hashes its tokens alone).
   */
  private stageSalt(salt: Uint8Array | null): number {
    return salt === null ? 0 : this.stg.stageBytes(salt);
  }
}

/**
 * Throws, before anything is made, when managers of these sizes cannot all
 * fit the 4 GiB of a 32-bit core beside what it holds already (a pool of
 * many ranks would otherwise grow the memory, which never shrinks, and fail
 * on its last rank).
 */
export function checkFits(rt: CoreInstance, what: string, managers: readonly { numBlocks: number; prefixOn: boolean }[]): void {
  let need = 0;
  for (const m of managers) need += rt.ex.mgr_region_bytes(m.numBlocks, m.prefixOn ? 1 : 0);
  const inUse = (rt.ex.heapTop() >>> 0) - rt.ex.heapFreeBytes();
  if (need + inUse > MAX_MEMORY_BYTES) {
    throw new RangeError(
      `kvpool: ${what} needs ${fmtBytes(need)} of Wasm memory; a 32-bit core holds at most 4 GiB, ${fmtBytes(inUse)} of it in use`,
    );
  }
}

/** The error for a manager the core could not make room for. */
export function exhausted(rt: CoreInstance, numBlocks: number, prefixOn: boolean, what = `a manager of ${numBlocks} blocks`): string {
  return exhaustedDoing(rt, `creating ${what}`, rt.ex.mgr_region_bytes(numBlocks, prefixOn ? 1 : 0));
}

/** The message of a step that needed `need` more bytes of Wasm memory than it could have. */
export function exhaustedDoing(rt: CoreInstance, doing: string, need: number): string {
  return (
    `kvpool: Wasm memory exhausted ${doing} ` +
    `(it needs ${fmtBytes(need)}; a 32-bit core holds at most 4 GiB, ${fmtBytes(rt.ex.heapTop() >>> 0)} of it in use or given back)`
  );
}

function fmtBytes(n: number): string {
  return n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(2)} GiB` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : `${n} bytes`;
}
