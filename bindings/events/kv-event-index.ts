// A router-side index of KV-cache events: it follows any number of engines
// (kvpool pools in process, or kvpool and vLLM publishers through their
// batches) and answers what a cache-aware router asks: how long a prefix of
// this token sequence each instance holds. It is what llm-d's precise
// prefix-cache scorer and Dynamo's KV router compute, as a building block for
// routing in JavaScript (docs/events.md).
//
// Like those routers, it keys blocks by its own chain of token hashes, so a
// query needs only tokens: a stored block's key chains its parent's key with
// its tokens, the parent found by the engine's hash among the blocks that
// engine announced. A block stored while its parent is not cached (evicted
// first, or never heard of by an index that joined late) is kept unkeyed and
// keyed as soon as its parent is announced again: a query cannot reach it
// before, and neither can the engine's own match, which stops at the missing
// parent. So the index holds exactly what each engine caches.
//
// Storage (index-slots.ts, index-keys.ts): blocks live in typed arrays, hashes
// and keys as u32 words, so that following a fleet for an hour allocates no
// object per block (an object, a token slice and string keys per block made
// the garbage collector the largest cost).

import { EV_CLEARED, EV_HASH, EV_HEADER, EV_KIND, EV_NUM_TOKENS, EV_PARENT, EV_PARENT_CHAIN, EV_PARENT_HASH, EV_PARENT_SALT, EV_STORED } from '../core/abi.js';
import type { CoreInstance } from '../core/core-instance.js';
import type { KVEvent, KVEventSource, SaltNames } from '../managers/kv-events.js';
import { checkBool, checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { chainKeys, rootKey } from './index-chain.js';
import { KeyHolders } from './index-keys.js';
import { parseLimits, type KVEventIndexLimits } from './index-limits.js';
import { HashNames } from './index-names.js';
import { drawSecret } from './index-seed.js';
import { BlockSlots, HASH_NAME, HASH_U64, NO_PARENT, type SlotOwner } from './index-slots.js';
import { checkEvents } from './vllm.js';
import { checkVllmBatch } from './vllm-check.js';
import { decodeVllmEventBatch, type VllmBlockHash, type VllmBlockStored, type VllmEventBatch } from './vllm-decode.js';

export { DEFAULT_INDEX_LIMITS, type KVEventIndexLimits } from './index-limits.js';

/** An engine's block hash as the index keeps it: an integer (uint64) or, from a bytes-form stream, hex. */
export type IndexedHash = bigint | string;

export interface IndexedBlock {
  hash: IndexedHash;
  /** null for a sequence's first block. */
  parentHash: IndexedHash | null;
  tokenIds: Int32Array;
  /** The extra hash keys of a first block (kvpool: [salt]), else null. */
  extraKeys: readonly unknown[] | null;
  /** False while its parent is not announced (a query cannot reach it yet). */
  keyed: boolean;
}

export interface KVEventIndexOptions {
  /** Tokens per block; default: the block size of the first stored event (give it when the streams come from the network). */
  blockSize?: number;
  /**
   * Count the copies of a block (default false). vLLM caches a key on a
   * second block when two requests compute the same block, announces each
   * copy with its own BlockStored and each copy's eviction with its own
   * BlockRemoved: the key stays cached until its last copy leaves. With
   * `countCopies` a source's block stays until removed as many times as it
   * was stored (what follows a vLLM engine exactly); without, a stored
   * block replaces the one of the same hash and a removal forgets it, so
   * applying an event twice changes nothing (kvpool's pools announce each
   * cached block once; a snapshot may overlap the events after it).
   */
  countCopies?: boolean;
  /** Bounds on what a stream may send (docs/events.md, limits); each one left out keeps its default. */
  limits?: Partial<KVEventIndexLimits>;
}

/** What an index holds, counted (a flood or a leak shows here). */
export interface KVEventIndexStats {
  /** Sources (instance, rank, medium) held. */
  sources: number;
  /** Ranks (instance, rank) held. */
  ranks: number;
  /** Blocks held, over every source. */
  blocks: number;
  /** Distinct chain keys held. */
  keys: number;
  /** Bytes-form hashes held by name. */
  names: number;
  /** Source and rank numbers ever in use at once: the size of the per-source arrays. */
  sourceNumbers: number;
  rankNumbers: number;
  /** The longest probe run of the index's hash tables (stays small whatever hashes a stream sends). */
  longestProbe: number;
}

export interface PrefixQuery {
  /** The request's cache salt (a salted sequence shares blocks only with the same salt). */
  salt?: string | null;
  /** Its LoRA adapter (vLLM's lora_name). */
  loraName?: string | null;
  /** Only blocks on these media count (default: all; "GPU" is the device, "CPU" a host tier). */
  media?: readonly string[];
}

/** How many leading blocks of a query one source holds. */
export interface PrefixMatch {
  instance: string;
  dpRank: number;
  medium: string;
  blocks: number;
}

export interface IndexSourceInfo {
  instance: string;
  dpRank: number;
  medium: string;
  blocks: number;
  waiting: number;
}

interface Source extends SlotOwner {
  readonly instance: string;
  readonly dpRank: number;
  readonly medium: string;
  /** Instance and rank together: a block counts for a rank on any of its media. */
  readonly rank: number;
}

const MAIN_KINDS = new Set(['full_attention', 'mla_attention', 'sink_full_attention']);
const NONE = -1;
const LOW32 = 0xffff_ffffn;

function hex(h: Uint8Array): string {
  let s = '';
  for (const b of h) s += b.toString(16).padStart(2, '0');
  return s;
}

/** A KVEvent's 16-byte hash as the wire's uint64 (its low 64 bits): [lo, hi]. */
function lowHalves(h: Uint8Array): [number, number] {
  return [(h[0]! | (h[1]! << 8) | (h[2]! << 16) | (h[3]! << 24)) >>> 0, (h[4]! | (h[5]! << 8) | (h[6]! << 16) | (h[7]! << 24)) >>> 0];
}

export class KVEventIndex {
  private size: number | null;
  private readonly sources = new Map<string, Source>();
  /** Sources by id; a removed source's id is reused (freeIds), so 200,000 engines coming and going cost what the most at once do. */
  private readonly byId: Array<Source | undefined> = [];
  private readonly freeIds: number[] = [];
  private readonly rankIds = new Map<string, number>();
  private readonly rankInstance: string[] = [];
  /** Per rank id: its sources (media) held. */
  private readonly rankMedia: number[] = [];
  private readonly freeRanks: number[] = [];
  /** The tables' hash key: a stream cannot choose collisions without it (index-seed.ts). */
  private readonly secret = drawSecret();
  private slots: BlockSlots | null = null;
  private readonly holders = new KeyHolders(this.secret);
  private readonly names = new HashNames();
  /** What a stream may send. */
  readonly limits: Readonly<KVEventIndexLimits>;
  // Scratch: the run being stored (hashes), its keys, a query's keys, keying work.
  private rForm = new Uint8Array(64);
  private rLo = new Uint32Array(64);
  private rHi = new Uint32Array(64);
  private runKeys = new Uint32Array(256);
  private queryKeys = new Uint32Array(256);
  private runTokens = new Int32Array(1024);
  private readonly todo: number[] = [];
  private readonly kids: number[] = [];
  private readonly one = new Uint32Array(4);
  private mark = new Int32Array(16);
  private runLen = new Int32Array(16);
  private stamp = 0;

  /** Events of KV-cache groups other than full attention (not indexed, as Dynamo drops them). */
  ignoredEvents = 0;
  /** Whether blocks count their copies (options.countCopies). */
  readonly countCopies: boolean;

  constructor(options: KVEventIndexOptions = {}) {
    checkObject('options', options);
    checkKeys('options', options, ['blockSize', 'limits', 'countCopies']);
    this.countCopies = options.countCopies === undefined ? false : checkBool('options.countCopies', options.countCopies);
    this.limits = Object.freeze(parseLimits(options.limits));
    this.size = options.blockSize === undefined ? null : checkInt('options.blockSize', options.blockSize, 1, this.limits.maxBlockSize);
  }

  /** Tokens per block (null until the first stored event when not given). */
  get blockSize(): number | null {
    return this.size;
  }

  // ---- feeding ----

  /** Applies events drained from a kvpool pool (`pool.drainEvents()` or a snapshot) of `instance`. */
  apply(instance: string, events: readonly KVEvent[]): void {
    this.checkInstance(instance);
    checkEvents(events);
    const lim = this.limits;
    if (events.length > lim.maxEventsPerBatch) throw new RangeError(`events must hold at most ${lim.maxEventsPerBatch} events (limits.maxEventsPerBatch), got ${events.length}`);
    let size = this.size;
    const plan = new SourcePlan();
    events.forEach((e, i) => {
      if (e.dpRank > lim.maxDpRank) throw new RangeError(`events[${i}].dpRank must be at most ${lim.maxDpRank} (limits.maxDpRank), got ${e.dpRank}`);
      if (e.medium.length > lim.maxNameLength) throw new RangeError(`events[${i}].medium must be at most ${lim.maxNameLength} characters long (limits.maxNameLength), got a string of ${e.medium.length}`);
      if (e.type === 'cleared') return;
      plan.add(e.dpRank, e.medium, e.type === 'stored' ? 1 : 0);
      if (e.type !== 'stored') return;
      if (e.tokenIds.length > lim.maxBlockSize) throw new RangeError(`events[${i}].tokenIds must hold at most ${lim.maxBlockSize} tokens (limits.maxBlockSize), got ${e.tokenIds.length}`);
      if (e.salt !== null && e.salt.length > lim.maxNameLength) throw new RangeError(`events[${i}].salt must be at most ${lim.maxNameLength} characters long (limits.maxNameLength), got a string of ${e.salt.length}`);
      size = agreedSize(size, e.tokenIds.length, `events[${i}] stores a block of`);
    });
    this.checkPlan(instance, plan, 'events');
    // The size is the first stored event's, whatever group it belongs to.
    this.size = size;
    for (const e of events) {
      if (e.type === 'cleared') {
        this.clearSource(instance, e.dpRank, e.medium);
      } else if (e.type === 'removed') {
        if (!this.mainGroup(e.group.kind, e.group.index)) continue;
        const [lo, hi] = lowHalves(e.hash);
        this.drop(this.source(instance, e.dpRank, e.medium), HASH_U64, lo, hi);
      } else {
        if (!this.mainGroup(e.group.kind, e.group.index)) continue;
        const [lo, hi] = lowHalves(e.hash);
        this.rForm[0] = HASH_U64;
        this.rLo[0] = lo;
        this.rHi[0] = hi;
        const [pLo, pHi] = e.parentHash === null ? [0, 0] : lowHalves(e.parentHash);
        const tokens = e.tokenIds instanceof Int32Array ? e.tokenIds : Int32Array.from(e.tokenIds);
        this.store(this.source(instance, e.dpRank, e.medium), 1, e.tokenIds.length, e.parentHash === null ? NO_PARENT : HASH_U64, pLo, pHi, tokens, 0, null, e.salt === null ? null : [e.salt]);
      }
    }
  }

  /**
   * Applies one KVEventBatch message (its payload, or decoded) published by
   * `instance`; `dpRank` stands in when the batch names none.
   */
  applyBatch(instance: string, batch: Uint8Array | VllmEventBatch, dpRank = 0): void {
    this.checkInstance(instance);
    checkInt('dpRank', dpRank, 0, this.limits.maxDpRank);
    const wire = batch instanceof Uint8Array;
    let b: VllmEventBatch;
    let where = `KVEventIndex.applyBatch(${JSON.stringify(instance)})`;
    try {
      const v: unknown = wire ? decodeVllmEventBatch(batch) : batch;
      if (v !== null && typeof v === 'object' && typeof (v as VllmEventBatch).ts === 'number') where += `, the batch of ts ${(v as VllmEventBatch).ts}`;
      checkVllmBatch(v, this.limits, wire);
      b = v;
    } catch (e) {
      throw refusal(e, where);
    }
    const rank = b.dataParallelRank ?? dpRank;
    let size = this.size;
    const plan = new SourcePlan();
    b.events.forEach((e, i) => {
      if (e.type === 'AllBlocksCleared') return;
      const stored = e.type === 'BlockStored' ? e.blockHashes.length : 0;
      plan.add(rank, e.medium ?? 'GPU', stored);
      if (e.type !== 'BlockStored') return;
      if (size !== null && e.blockSize !== size) throw new RangeError(`${where}: events[${i}].${wire ? 'block_size' : 'blockSize'} is ${e.blockSize}, but the index's blocks hold ${size} tokens`);
      size = e.blockSize;
    });
    this.checkPlan(instance, plan, where);
    for (const e of b.events) {
      if (e.type === 'AllBlocksCleared') {
        // vLLM's reset of the device cache; its other media keep their blocks.
        this.clearSource(instance, rank, 'GPU');
      } else if (e.type === 'BlockRemoved') {
        if (!this.mainGroup(null, e.groupIdx)) continue;
        const s = this.source(instance, rank, e.medium ?? 'GPU');
        for (const h of e.blockHashes) {
          if (typeof h !== 'object') {
            const v = BigInt.asUintN(64, BigInt(h));
            this.drop(s, HASH_U64, Number(v & LOW32), Number(v >> 32n));
          } else {
            const id = this.names.known(hex(h));
            if (id !== NONE) this.drop(s, HASH_NAME, id, 0);
          }
        }
      } else {
        if (!this.mainGroup(e.kvCacheSpecKind, e.groupIdx)) continue;
        this.storeWire(this.source(instance, rank, e.medium ?? 'GPU'), e);
      }
    }
  }

  /** A decoded BlockStored: its hashes as numbers (bytes-form ones held by name while stored). */
  private storeWire(s: Source, e: VllmBlockStored): void {
    const n = e.blockHashes.length;
    if (this.rLo.length < n) this.growRun(n);
    const held: number[] = [];
    const put = (h: VllmBlockHash | number, i: number): void => {
      // A hand-built batch may give a hash as a safe integer (checked).
      if (typeof h !== 'object') {
        const v = BigInt.asUintN(64, BigInt(h));
        this.rForm[i] = HASH_U64;
        this.rLo[i] = Number(v & LOW32);
        this.rHi[i] = Number(v >> 32n);
      } else {
        const id = this.names.acquire(hex(h));
        held.push(id);
        this.rForm[i] = HASH_NAME;
        this.rLo[i] = id;
        this.rHi[i] = 0;
      }
    };
    e.blockHashes.forEach(put);
    let pForm = NO_PARENT;
    let pLo = 0;
    let pHi = 0;
    if (e.parentBlockHash !== null) {
      // The parent in the slot after the run's (scratch has room: growRun keeps one spare).
      put(e.parentBlockHash, n);
      [pForm, pLo, pHi] = [this.rForm[n]!, this.rLo[n]!, this.rHi[n]!];
    }
    try {
      this.store(s, n, e.blockSize, pForm, pLo, pHi, Int32Array.from(e.tokenIds), 0, e.loraName, e.extraKeys?.[0] ?? null);
    } finally {
      for (const id of held) this.names.release(id);
    }
  }

  private growRun(n: number): void {
    const cap = 2 * n + 1;
    this.rForm = new Uint8Array(cap);
    this.rLo = new Uint32Array(cap);
    this.rHi = new Uint32Array(cap);
  }

  /**
   * @internal Applies raw event records of a kvpool pool of `instance` (the
   * arguments `pool.drainEventRecords` visits with, and the pool's
   * `saltNames`) exactly as `applyBatch` applies the batch vllm.ts encodes
   * from them (map form, uint64 hashes): the in-thread fleet's path, with no
   * msgpack in between. The records are read in place; nothing is copied per
   * event but a run's tokens.
   */
  applyRecords(instance: string, dpRank: number, source: KVEventSource, rt: CoreInstance, ptr: number, len: number, salts: SaltNames | null): void {
    this.checkInstance(instance);
    checkInt('dpRank', dpRank, 0, this.limits.maxDpRank);
    const end = ptr + len;
    let size = this.size;
    for (let p = ptr; p < end; ) {
      const kind = rt.i32[(p + EV_KIND) >>> 2]!;
      if (kind !== EV_STORED) {
        p += EV_HEADER;
        continue;
      }
      const ntok = rt.i32[(p + EV_NUM_TOKENS) >>> 2]!;
      size = agreedSize(size, ntok, 'a BlockStored event has block_size');
      p += EV_HEADER + ntok * 4;
    }
    const group = source.group;
    for (let p = ptr; p < end; ) {
      const kind = rt.i32[(p + EV_KIND) >>> 2]!;
      if (kind === EV_CLEARED) {
        this.clearSource(instance, dpRank, 'GPU');
        p += EV_HEADER;
        continue;
      }
      // A run as the wire merges it: one BlockStored or BlockRemoved event.
      const n = rt.ex.ev_wire_run(p, end);
      if (kind !== EV_STORED) {
        // A BlockRemoved names its group by index only.
        if (this.mainGroup(null, group.index)) {
          const s = this.source(instance, dpRank, source.medium);
          for (let k = 0; k < n; k++) {
            const w = (p + k * EV_HEADER + EV_HASH) >>> 2;
            this.drop(s, HASH_U64, rt.u32[w]!, rt.u32[w + 1]!);
          }
        }
        p += n * EV_HEADER;
        continue;
      }
      const B = rt.i32[(p + EV_NUM_TOKENS) >>> 2]!;
      const rec = EV_HEADER + B * 4;
      if (this.mainGroup(group.kind, group.index)) {
        if (this.rLo.length < n) this.growRun(n);
        if (this.runTokens.length < n * B) this.runTokens = new Int32Array(2 * n * B);
        const { u32, i32, u8 } = rt;
        for (let k = 0; k < n; k++) {
          const q = p + k * rec;
          this.rForm[k] = HASH_U64;
          this.rLo[k] = u32[(q + EV_HASH) >>> 2]!;
          this.rHi[k] = u32[(q + EV_HASH + 4) >>> 2]!;
          const t = (q + EV_HEADER) >>> 2;
          for (let j = 0; j < B; j++) this.runTokens[k * B + j] = i32[t + j]!;
        }
        const parentKind = i32[(p + EV_PARENT) >>> 2]!;
        const chained = parentKind === EV_PARENT_CHAIN;
        const salt = parentKind === EV_PARENT_SALT ? (salts?.lookup(u8, p + EV_PARENT_HASH) ?? null) : null;
        const pw = (p + EV_PARENT_HASH) >>> 2;
        // Storing hashes through the core: its memory may grow, so the views are read again next time round.
        this.store(this.source(instance, dpRank, source.medium), n, B, chained ? HASH_U64 : NO_PARENT, chained ? u32[pw]! : 0, chained ? u32[pw + 1]! : 0, this.runTokens, 0, null, salt === null ? null : [salt]);
      }
      p += n * rec;
    }
  }

  /** Forgets everything `instance` published (it went away). */
  removeInstance(instance: string): void {
    this.checkInstance(instance);
    for (const [k, s] of this.sources) {
      if (s.instance !== instance) continue;
      this.clearBlocks(s);
      this.sources.delete(k);
      this.byId[s.id] = undefined;
      this.freeIds.push(s.id);
      if (--this.rankMedia[s.rank]! === 0) {
        this.rankIds.delete(`${instance}\u0000${s.dpRank}`);
        this.freeRanks.push(s.rank);
      }
    }
  }

  /** Counts of what the index holds. */
  stats(): KVEventIndexStats {
    return {
      sources: this.sources.size,
      ranks: this.rankIds.size,
      blocks: this.slots?.used ?? 0,
      keys: this.holders.size,
      names: this.names.size,
      sourceNumbers: this.byId.length,
      rankNumbers: this.rankInstance.length,
      longestProbe: Math.max(this.holders.longestProbe(), this.slots?.longestProbe() ?? 0),
    };
  }

  private checkInstance(instance: string): void {
    checkInstance(instance);
    if (instance.length > this.limits.maxNameLength) throw new RangeError(`instance must be at most ${this.limits.maxNameLength} characters long (limits.maxNameLength), got a string of ${instance.length}`);
  }

  /** Refuses a batch whose new sources or stored blocks would pass the limits (counted as if it removed nothing). */
  private checkPlan(instance: string, plan: SourcePlan, where: string): void {
    const lim = this.limits;
    for (const [rank, perMedium] of plan.ranks) {
      const rankId = this.rankIds.get(`${instance}\u0000${rank}`);
      let count = rankId === undefined ? 0 : this.rankMedia[rankId]!;
      for (const [medium, stored] of perMedium) {
        const s = this.sources.get(`${instance}\u0000${rank}\u0000${medium}`);
        if (s === undefined) count++;
        const held = s?.count ?? 0;
        if (held + stored > lim.maxBlocksPerSource) {
          throw new RangeError(`${where}: it stores ${stored} blocks on rank ${rank}, medium ${JSON.stringify(medium)}, which holds ${held}: more than limits.maxBlocksPerSource (${lim.maxBlocksPerSource})`);
        }
      }
      if (count > lim.maxMediaPerRank) throw new RangeError(`${where}: rank ${rank} would hold blocks on ${count} media, more than limits.maxMediaPerRank (${lim.maxMediaPerRank})`);
    }
  }

  private mainGroup(kind: string | null, index: number | null): boolean {
    const main = isMain(kind, index);
    if (!main) this.ignoredEvents++;
    return main;
  }

  private source(instance: string, dpRank: number, medium: string): Source {
    const k = `${instance}\u0000${dpRank}\u0000${medium}`;
    let s = this.sources.get(k);
    if (s === undefined) {
      const rk = `${instance}\u0000${dpRank}`;
      let rank = this.rankIds.get(rk);
      if (rank === undefined) {
        rank = this.freeRanks.pop() ?? this.rankInstance.length;
        this.rankIds.set(rk, rank);
        this.rankInstance[rank] = instance;
        this.rankMedia[rank] = 0;
      }
      this.rankMedia[rank]!++;
      s = { id: this.freeIds.pop() ?? this.byId.length, instance, dpRank, medium, rank, head: NONE, tail: NONE, count: 0, waiting: 0 };
      this.byId[s.id] = s;
      this.sources.set(k, s);
    }
    return s;
  }

  private slotsOf(B: number): BlockSlots {
    if (this.size === null) this.size = B;
    return (this.slots ??= new BlockSlots(this.size, this.secret));
  }

  /**
   * Stores a run of `n` blocks of `B` tokens (hashes in the run scratch, each
   * the parent of the next; tokens at `tokens[at..]`) on parent (pForm, pLo,
   * pHi). A block keyed on a parent known now gets its key from one chain
   * computed for the whole run.
   */
  private store(s: Source, n: number, B: number, pForm: number, pLo: number, pHi: number, tokens: Int32Array, at: number, lora: string | null, extra0: readonly unknown[] | null): void {
    const slots = this.slotsOf(B);
    if (this.runKeys.length < 4 * n) this.runKeys = new Uint32Array(8 * n);
    const keys = this.runKeys;
    let prevSlot = NONE;
    let prevChained = false;
    if (pForm === NO_PARENT) {
      chainKeys(tokens, at, n, B, rootKey(lora, extra0), 0, keys);
      prevChained = true;
    } else {
      prevSlot = slots.find(s.id, pForm, pLo, pHi);
      if (prevSlot !== NONE && slots.keyed[prevSlot] === 1) {
        chainKeys(tokens, at, n, B, slots.key, prevSlot * 4, keys);
        prevChained = true;
      }
    }
    const names = this.names;
    for (let i = 0; i < n; i++) {
      const form = this.rForm[i]!;
      const lo = this.rLo[i]!;
      const hi = this.rHi[i]!;
      // A block of this hash held already is replaced (counting copies: it carries its count over).
      const old = slots.find(s.id, form, lo, hi);
      const copies = old === NONE || !this.countCopies ? 1 : slots.copies[old]! + 1;
      if (old !== NONE) this.forget(s, old);
      const x = slots.add(s, form, lo, hi, pForm, pLo, pHi, tokens, at + i * B, i === 0 && pForm === NO_PARENT ? extra0 : null);
      slots.copies[x] = copies;
      if (form === HASH_NAME) names.ref(lo);
      if (pForm === HASH_NAME) names.ref(pLo);
      let chained = false;
      if (pForm === NO_PARENT) {
        this.keyNode(s, x, keys, 0);
        chained = true;
      } else {
        const p = slots.find(s.id, pForm, pLo, pHi);
        if (p !== NONE && p !== x && slots.keyed[p] === 1) {
          // The run's chain holds this key when the parent is the block keyed from it just before.
          chained = prevChained && p === prevSlot;
          if (chained) this.keyNode(s, x, keys, i * 4);
          else {
            chainKeys(slots.tokens, x * B, 1, B, slots.key, p * 4, this.one);
            this.keyNode(s, x, this.one, 0);
          }
        } else slots.wait(s, x);
      }
      prevSlot = x;
      prevChained = chained;
      pForm = form;
      pLo = lo;
      pHi = hi;
    }
  }

  /** Keys block `x` with the key at `key[at..]`, then every block that waited for it (on its parent's key). */
  private keyNode(s: Source, x: number, key: Uint32Array, at: number): void {
    const slots = this.slots!;
    const B = slots.B;
    const todo = this.todo; // (child, parent) pairs
    const kids = this.kids;
    const k = slots.key;
    for (let i = 0; i < 4; i++) k[x * 4 + i] = key[at + i]!;
    for (;;) {
      slots.keyed[x] = 1;
      this.holders.hold(k, x * 4, s.id);
      slots.takeWaiting(s, slots.hForm[x]!, slots.hLo[x]!, slots.hHi[x]!, kids);
      for (const c of kids) todo.push(c, x);
      kids.length = 0;
      const p = todo.pop();
      if (p === undefined) break;
      x = todo.pop()!;
      chainKeys(slots.tokens, x * B, 1, B, k, p * 4, this.one);
      for (let i = 0; i < 4; i++) k[x * 4 + i] = this.one[i]!;
    }
  }

  /**
   * A removal of block (form, lo, hi) of `s`: forgets it (keyed or waiting;
   * blocks keyed on it keep their keys), or, counting copies, one copy.
   */
  private drop(s: Source, form: number, lo: number, hi: number): void {
    const slots = this.slots;
    if (slots === null) return;
    const x = slots.find(s.id, form, lo, hi);
    if (x === NONE) return;
    if (this.countCopies && slots.copies[x]! > 1) slots.copies[x]!--;
    else this.forget(s, x);
  }

  private forget(s: Source, x: number): void {
    const slots = this.slots!;
    if (slots.keyed[x] === 1) this.holders.unhold(slots.key, x * 4, s.id);
    const form = slots.hForm[x]!;
    const lo = slots.hLo[x]!;
    const pForm = slots.pForm[x]!;
    const pLo = slots.pLo[x]!;
    slots.remove(s, x);
    if (form === HASH_NAME) this.names.release(lo);
    if (pForm === HASH_NAME) this.names.release(pLo);
  }

  private clearSource(instance: string, dpRank: number, medium: string): void {
    const s = this.sources.get(`${instance}\u0000${dpRank}\u0000${medium}`);
    if (s !== undefined) this.clearBlocks(s);
  }

  private clearBlocks(s: Source): void {
    while (s.head !== NONE) this.forget(s, s.head);
  }

  // ---- queries ----

  /**
   * For every source (instance, dp rank, medium) holding the first block of
   * `tokens`, how many leading blocks it holds; longest first.
   */
  match(tokens: ArrayLike<number>, query: PrefixQuery = {}): PrefixMatch[] {
    const n = this.keysOf(tokens, query);
    const media = parseMedia(query);
    const out: PrefixMatch[] = [];
    if (n === 0) return out;
    const keys = this.queryKeys;
    this.growMarks(this.byId.length);
    // Sources alive after key i: those holding keys 0..i (each on a medium of the query).
    const first = this.holdersOf(keys, 0, media);
    let alive = first;
    for (let i = 0; alive.length > 0; ) {
      for (const s of alive) this.runLen[s.id] = i + 1;
      if (++i >= n) break;
      const stamp = ++this.stamp;
      for (const s of this.holdersOf(keys, i * 4, media)) this.mark[s.id] = stamp;
      alive = alive.filter((s) => this.mark[s.id] === stamp);
    }
    for (const s of first) out.push({ instance: s.instance, dpRank: s.dpRank, medium: s.medium, blocks: this.runLen[s.id]! });
    return out.sort((a, b) => b.blocks - a.blocks || cmp(a.instance, b.instance) || a.dpRank - b.dpRank || cmp(a.medium, b.medium));
  }

  /**
   * The longest prefix of `tokens`, in blocks, that each instance holds on
   * one dp rank (a block counts when the rank holds it on any medium of the
   * query, so a host tier continues the device's prefix). Instances holding
   * no block of it are absent.
   */
  longestPrefix(tokens: ArrayLike<number>, query: PrefixQuery = {}): Map<string, number> {
    const n = this.keysOf(tokens, query);
    const media = parseMedia(query);
    const best = new Map<string, number>();
    if (n === 0) return best;
    const keys = this.queryKeys;
    this.growMarks(this.rankInstance.length);
    let alive: number[] = [];
    for (let i = 0; i < n; i++) {
      // The ranks holding key i on a medium of the query (each once).
      const stamp = ++this.stamp;
      const here: number[] = [];
      for (const s of this.holdersOf(keys, i * 4, media)) {
        if (this.mark[s.rank] === stamp) continue;
        this.mark[s.rank] = stamp;
        here.push(s.rank);
      }
      alive = i === 0 ? here : alive.filter((r) => this.mark[r] === stamp);
      if (alive.length === 0) break;
      for (const r of alive) {
        const instance = this.rankInstance[r]!;
        best.set(instance, Math.max(best.get(instance) ?? 0, i + 1));
      }
    }
    return best;
  }

  /** The sources holding the key at `keys[at..]` whose medium the query counts. */
  private holdersOf(keys: Uint32Array, at: number, media: Set<string> | null): Source[] {
    const out: Source[] = [];
    const e = this.holders.find(keys, at);
    if (e === NONE) return out;
    for (let h = this.holders.firstHolder(e); h !== NONE; h = this.holders.nextHolder(h)) {
      const s = this.byId[this.holders.holderSource(h)]!;
      if (media === null || media.has(s.medium)) out.push(s);
    }
    return out;
  }

  private growMarks(n: number): void {
    if (this.mark.length >= n) return;
    const mark = new Int32Array(2 * n);
    mark.set(this.mark);
    this.mark = mark;
    const len = new Int32Array(2 * n);
    len.set(this.runLen);
    this.runLen = len;
  }

  /** Checks a query and writes the keys of its full blocks to `queryKeys`; returns how many. */
  private keysOf(tokens: ArrayLike<number>, query: PrefixQuery): number {
    if (tokens === null || typeof tokens !== 'object' || typeof (tokens as ArrayLike<number>).length !== 'number') {
      throw new TypeError(`tokens must be an Int32Array or an array of int32 token ids, got ${describe(tokens)}`);
    }
    checkObject('query', query);
    checkKeys('query', query, ['salt', 'loraName', 'media']);
    const salt = query.salt ?? null;
    const lora = query.loraName ?? null;
    if (salt !== null && typeof salt !== 'string') throw new TypeError(`query.salt must be a string or null, got ${describe(salt)}`);
    if (lora !== null && typeof lora !== 'string') throw new TypeError(`query.loraName must be a string or null, got ${describe(lora)}`);
    if (!(tokens instanceof Int32Array)) {
      for (let i = 0; i < tokens.length; i++) {
        const t = tokens[i];
        if (typeof t !== 'number' || (t | 0) !== t) throw new RangeError(`tokens[${i}] must be an int32 token id, got ${describe(t)}`);
      }
    }
    const B = this.size;
    if (B === null) return 0;
    const n = Math.floor(tokens.length / B);
    if (this.queryKeys.length < 4 * n) this.queryKeys = new Uint32Array(8 * n);
    chainKeys(tokens, 0, n, B, rootKey(lora, salt === null || salt === '' ? null : [salt]), 0, this.queryKeys);
    return n;
  }

  // ---- what it holds ----

  /** Every source and how many blocks it holds (`waiting`: of them, blocks whose parent is not announced, so not reachable yet). */
  sourcesInfo(): IndexSourceInfo[] {
    return [...this.sources.values()].map((s) => ({ instance: s.instance, dpRank: s.dpRank, medium: s.medium, blocks: s.count, waiting: s.waiting }));
  }

  /** The blocks one source holds, as announced (order: as stored). */
  blocks(instance: string, dpRank = 0, medium = 'GPU'): IndexedBlock[] {
    this.checkInstance(instance);
    checkInt('dpRank', dpRank, 0);
    const s = this.sources.get(`${instance}\u0000${dpRank}\u0000${medium}`);
    const slots = this.slots;
    if (s === undefined || slots === null) return [];
    const out: IndexedBlock[] = [];
    const B = slots.B;
    for (let x = s.head; x !== NONE; x = slots.after(x)) {
      out.push({
        hash: this.hashOf(slots.hForm[x]!, slots.hLo[x]!, slots.hHi[x]!),
        parentHash: slots.pForm[x] === NO_PARENT ? null : this.hashOf(slots.pForm[x]!, slots.pLo[x]!, slots.pHi[x]!),
        tokenIds: slots.tokens.slice(x * B, (x + 1) * B),
        extraKeys: slots.extras.get(x) ?? null,
        keyed: slots.keyed[x] === 1,
      });
    }
    return out;
  }

  private hashOf(form: number, lo: number, hi: number): IndexedHash {
    return form === HASH_NAME ? this.names.name(lo) : (BigInt(hi) << 32n) | BigInt(lo);
  }
}

function isMain(kind: string | null, index: number | null): boolean {
  return kind === null ? index === null || index === 0 : MAIN_KINDS.has(kind);
}

function parseMedia(q: PrefixQuery): Set<string> | null {
  if (q.media === undefined) return null;
  if (!Array.isArray(q.media) || q.media.some((m) => typeof m !== 'string')) {
    throw new TypeError(`query.media must be an array of strings, got ${describe(q.media)}`);
  }
  return new Set(q.media);
}

function checkInstance(instance: unknown): void {
  if (typeof instance !== 'string' || instance === '') throw new TypeError(`instance must be a non-empty string, got ${describe(instance)}`);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Per rank and medium, the blocks a batch stores (its sources, before any is made). */
class SourcePlan {
  readonly ranks = new Map<number, Map<string, number>>();

  add(rank: number, medium: string, stored: number): void {
    let m = this.ranks.get(rank);
    if (m === undefined) this.ranks.set(rank, (m = new Map()));
    m.set(medium, (m.get(medium) ?? 0) + stored);
  }
}

/** A refusal of a batch, named: the same error class, the batch's place first. */
function refusal(e: unknown, where: string): Error {
  if (e instanceof RangeError) return new RangeError(`${where}: ${e.message}`);
  if (e instanceof TypeError) return new TypeError(`${where}: ${e.message}`);
  return e as Error;
}

/** The index's block size once a stored event of `n`-token blocks agrees with it (the first sets it); `what` names the event in the refusal. */
function agreedSize(size: number | null, n: number, what: string): number {
  if (size !== null && n !== size) throw new RangeError(`the index's blocks hold ${size} tokens, but ${what} ${n}`);
  return n;
}
