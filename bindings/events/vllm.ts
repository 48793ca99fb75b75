// vLLM's KV-event wire format, so routers that consume vLLM's events (llm-d's
// KV-cache indexer, NVIDIA Dynamo's KV router, vLLM's own subscribers) can
// consume ours. docs/events.md describes both forms and who reads which.
//
// A batch is the msgpack array [ts, events, data_parallel_rank]. Each event is
// either a map with a "type" key (vLLM 0.26 on, the default here) or the
// positional array vLLM sent before: the tag, then the fields in declaration
// order, through lora_name (8 elements for BlockStored):
//   BlockStored: block_hashes, parent_block_hash, token_ids, block_size,
//     lora_id, medium, lora_name, [extra_keys, group_idx, kv_cache_spec_kind,
//     kv_cache_spec_sliding_window]
//   BlockRemoved: block_hashes, medium, [group_idx]
//   AllBlocksCleared
// One BlockStored carries a run of blocks, each the parent of the next, as
// vLLM sends a request's newly cached blocks; consecutive stored events that
// chain are merged, and so are consecutive removals.

import { EV_HEADER, EV_PARENT_CHAIN, EV_PARENT_SALT, EV_REMOVED, EV_STORED } from '../core/abi.js';
import type { CoreInstance } from '../core/core-instance.js';
import type { KVCacheGroup, KVEvent, KVEventSource, SaltNames } from '../managers/kv-events.js';
import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { encodeStr, MsgpackWriter } from './msgpack-writer.js';

/**
 * How block hashes go on the wire: `'uint64'` (the default, as vLLM with
 * VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES; the only form Dynamo reads): the low
 * 64 bits of the XXH3-128 hash, which is vLLM's integer form of the bytes
 * below (their last 8 bytes, big endian); `'bytes'`: the 16-byte canonical
 * XXH3-128 digest (big endian, high half first, as xxHash's digest()).
 */
export type BlockHashFormat = 'uint64' | 'bytes';

/** Events as maps with a "type" key (vLLM 0.26 on) or positional arrays (earlier vLLM). */
export type VllmEventFormat = 'map' | 'positional';

export interface VllmEncodeOptions {
  /** Batch timestamp in seconds (default: now). */
  ts?: number;
  /** Default 'map'. */
  format?: VllmEventFormat;
  /** Default 'uint64'. */
  blockHashes?: BlockHashFormat;
}

/** A batch for one dp rank, ready to publish. */
export interface EncodedBatch {
  dpRank: number;
  payload: Uint8Array;
}

const OPTION_KEYS = ['ts', 'format', 'blockHashes'] as const;

interface WireOptions {
  map: boolean;
  bytes: boolean;
}

/** Checked options (the timestamp apart). */
export function parseWireOptions(options: VllmEncodeOptions): WireOptions & { ts: number } {
  checkObject('options', options);
  checkKeys('options', options, OPTION_KEYS);
  const ts = options.ts ?? Date.now() / 1000;
  if (typeof ts !== 'number' || !Number.isFinite(ts)) throw new TypeError(`options.ts must be a finite number, got ${describe(ts)}`);
  const format = options.format ?? 'map';
  if (format !== 'map' && format !== 'positional') throw new RangeError(`options.format must be "map" or "positional", got ${describe(format)}`);
  const hashes = options.blockHashes ?? 'uint64';
  if (hashes !== 'uint64' && hashes !== 'bytes') throw new RangeError(`options.blockHashes must be "uint64" or "bytes", got ${describe(hashes)}`);
  return { ts, map: format === 'map', bytes: hashes === 'bytes' };
}

/**
 * The topic vLLM publishes KV events on, `kv@<instance>@<model>`, the form
 * llm-d parses (it splits on "@" and takes the instance as the pod). With
 * `dpRank`, the instance becomes `<instance>-dp<rank>`: one topic, so one
 * llm-d pod, per dp rank (llm-d ignores data_parallel_rank).
 */
export function kvEventsTopic(instance: string, model: string, dpRank?: number): string {
  for (const [name, v] of [['instance', instance], ['model', model]] as const) {
    if (typeof v !== 'string') throw new TypeError(`${name} must be a string, got ${describe(v)}`);
    if (v === '') throw new RangeError(`${name} must not be empty`);
    if (v.includes('@')) throw new RangeError(`${name} must not contain "@" (routers split the topic kv@<instance>@<model> on it), got ${JSON.stringify(v)}`);
  }
  if (dpRank === undefined) return `kv@${instance}@${model}`;
  checkInt('dpRank', dpRank, 0);
  return `kv@${instance}-dp${dpRank}@${model}`;
}

// ---- the writer ----

const TAG_STORED = encodeStr('BlockStored');
const TAG_REMOVED = encodeStr('BlockRemoved');
const TAG_CLEARED = encodeStr('AllBlocksCleared');
const K = {
  type: encodeStr('type'),
  blockHashes: encodeStr('block_hashes'),
  parent: encodeStr('parent_block_hash'),
  tokenIds: encodeStr('token_ids'),
  blockSize: encodeStr('block_size'),
  loraId: encodeStr('lora_id'),
  medium: encodeStr('medium'),
  loraName: encodeStr('lora_name'),
  extraKeys: encodeStr('extra_keys'),
  groupIdx: encodeStr('group_idx'),
  specKind: encodeStr('kv_cache_spec_kind'),
  window: encodeStr('kv_cache_spec_sliding_window'),
};
const strings = new Map<string, Uint8Array>();
function cachedStr(s: string): Uint8Array {
  let b = strings.get(s);
  if (b === undefined) {
    b = encodeStr(s);
    if (strings.size < 64) strings.set(s, b);
  }
  return b;
}

function defaultGroup(g: KVCacheGroup): boolean {
  return g.index === 0 && g.kind === 'full_attention';
}

/**
 * Writes batches into one growing buffer: begin, events (from records in
 * the core's memory, or from event objects), end; `bytes()` is everything
 * written since the last `reset()`.
 */
export class VllmWireEncoder {
  readonly w = new MsgpackWriter(1 << 20);
  private eventsAt = -1;
  private count = 0;
  private start = 0;

  constructor(private readonly opts: WireOptions) {}

  get inBatch(): boolean {
    return this.eventsAt >= 0;
  }

  beginBatch(ts: number): void {
    const w = this.w;
    this.start = w.pos;
    w.ensure(1);
    w.buf[w.pos++] = 0x93;
    w.f64(ts);
    this.eventsAt = w.array32();
    this.count = 0;
  }

  /** Closes the batch; returns where it starts in the buffer. */
  endBatch(dpRank: number): number {
    this.w.patchArray32(this.eventsAt, this.count);
    this.w.int(dpRank);
    this.eventsAt = -1;
    return this.start;
  }

  /** Everything written since the last reset (a view of the buffer). */
  bytes(): Uint8Array {
    return this.w.buf.subarray(0, this.w.pos);
  }

  reset(): void {
    this.w.pos = 0;
  }

  /** A hash in the core's layout (16 bytes at `u8[at..]`, both halves little endian) in the wire form. */
  private hash(u8: Uint8Array, at: number): void {
    const w = this.w;
    w.ensure(18);
    const b = w.buf;
    let q = w.pos;
    if (this.opts.bytes) {
      b[q++] = 0xc4;
      b[q++] = 16;
      for (let i = 15; i >= 0; i--) b[q++] = u8[at + i]!;
    } else {
      b[q++] = 0xcf;
      for (let i = 7; i >= 0; i--) b[q++] = u8[at + i]!;
    }
    w.pos = q;
  }

  private key(k: Uint8Array): void {
    if (this.opts.map) this.w.raw(k);
  }

  /** The fields of a BlockStored up to block_hashes' header. */
  private storedHead(n: number, extra: boolean, group: KVCacheGroup): void {
    const w = this.w;
    const tail = !defaultGroup(group);
    if (this.opts.map) {
      w.mapHeader(11 + (group.slidingWindow !== null ? 1 : 0));
      w.raw(K.type);
      w.raw(TAG_STORED);
    } else {
      w.arrayHeader(8 + (extra || tail ? 1 : 0) + (tail ? (group.slidingWindow !== null ? 3 : 2) : 0));
      w.raw(TAG_STORED);
    }
    this.key(K.blockHashes);
    w.arrayHeader(n);
    this.count++;
  }

  /** The fields of a BlockStored after token_ids. */
  private storedTail(n: number, blockSize: number, medium: string, salt: string | null, group: KVCacheGroup): void {
    const w = this.w;
    const tail = !defaultGroup(group);
    this.key(K.blockSize);
    w.int(blockSize);
    this.key(K.loraId);
    w.nil();
    this.key(K.medium);
    w.raw(cachedStr(medium));
    this.key(K.loraName);
    w.nil();
    if (this.opts.map || salt !== null || tail) {
      // One entry per block; a salt is block 0's extra key, as vLLM sends it.
      this.key(K.extraKeys);
      w.arrayHeader(n);
      if (salt !== null) {
        w.arrayHeader(1);
        w.str(salt);
      } else w.nil();
      w.ensure(n);
      w.buf.fill(0xc0, w.pos, w.pos + n - 1);
      w.pos += n - 1;
    }
    if (this.opts.map || tail) this.groupFields(group, true);
  }

  private groupFields(group: KVCacheGroup, spec: boolean): void {
    const w = this.w;
    this.key(K.groupIdx);
    w.int(group.index);
    if (!spec) return;
    this.key(K.specKind);
    w.raw(cachedStr(group.kind));
    if (group.slidingWindow !== null) {
      this.key(K.window);
      w.int(group.slidingWindow);
    }
  }

  private removedHead(n: number, group: KVCacheGroup): void {
    const w = this.w;
    const tail = !defaultGroup(group);
    if (this.opts.map) {
      w.mapHeader(4);
      w.raw(K.type);
      w.raw(TAG_REMOVED);
    } else {
      w.arrayHeader(tail ? 4 : 3);
      w.raw(TAG_REMOVED);
    }
    this.key(K.blockHashes);
    w.arrayHeader(n);
    this.count++;
  }

  private removedTail(medium: string, group: KVCacheGroup): void {
    this.key(K.medium);
    this.w.raw(cachedStr(medium));
    if (this.opts.map || !defaultGroup(group)) this.groupFields(group, false);
  }

  cleared(): void {
    const w = this.w;
    if (this.opts.map) {
      w.mapHeader(1);
      w.raw(K.type);
    } else w.arrayHeader(1);
    w.raw(TAG_CLEARED);
    this.count++;
  }

  /**
   * Encodes `len` bytes of the core's records at `ptr` of `rt` (see
   * assembly/events.ts). A run's hashes and tokens are written by the core
   * (assembly/event-wire.ts) into its staging area and copied here.
   */
  records(source: KVEventSource, rt: CoreInstance, ptr: number, len: number, salts: SaltNames | null): void {
    const end = ptr + len;
    let p = ptr;
    let { i32, u8 } = rt.views();
    const w = this.w;
    const bytesForm = this.opts.bytes ? 1 : 0;
    while (p < end) {
      const kind = i32[p >>> 2]!;
      if (kind === EV_STORED) {
        const ntok = i32[(p + 12) >>> 2]!;
        const rec = EV_HEADER + ntok * 4;
        // The run: each next record chains on the one before (its parent is that block).
        const n = rt.ex.ev_wire_run(p, end);
        const q = p + n * rec;
        const parentKind = i32[(p + 8) >>> 2]!;
        const salt = parentKind === EV_PARENT_SALT ? (salts?.lookup(u8, p + 32) ?? null) : null;
        const parent = parentKind === EV_PARENT_CHAIN ? u8.slice(p + 32, p + 48) : null;
        // Staging may grow the memory: the views are taken again after it.
        const area = rt.staging.byteSpace(n * 18 + n * ntok * 5 + 8);
        ({ i32, u8 } = rt.views());
        const hb = rt.ex.ev_wire_hashes(p, rec, n, bytesForm, area);
        const tb = rt.ex.ev_wire_tokens(p, rec, n, ntok, area + hb);
        this.storedHead(n, salt !== null, source.group);
        w.raw(u8.subarray(area, area + hb));
        this.key(K.parent);
        if (parent !== null) this.hash(parent, 0);
        else w.nil();
        this.key(K.tokenIds);
        w.arrayHeader(n * ntok);
        w.raw(u8.subarray(area + hb, area + hb + tb));
        this.storedTail(n, ntok, source.medium, salt, source.group);
        p = q;
      } else if (kind === EV_REMOVED) {
        const n = rt.ex.ev_wire_run(p, end);
        const area = rt.staging.byteSpace(n * 18);
        ({ i32, u8 } = rt.views());
        const hb = rt.ex.ev_wire_hashes(p, EV_HEADER, n, bytesForm, area);
        this.removedHead(n, source.group);
        w.raw(u8.subarray(area, area + hb));
        this.removedTail(source.medium, source.group);
        p += n * EV_HEADER;
      } else {
        this.cleared();
        p += EV_HEADER;
      }
    }
  }

  /** Encodes event objects (checked already), merged as `records` merges them. */
  events(events: readonly KVEvent[]): void {
    let i = 0;
    while (i < events.length) {
      const e = events[i]!;
      if (e.type === 'stored') {
        let j = i + 1;
        for (; j < events.length; j++) {
          const n = events[j]!;
          const prev = events[j - 1] as typeof e;
          if (n.type !== 'stored' || n.parentHash === null || !sameBytes(n.parentHash, prev.hash) || !sameSource(n, e) || n.tokenIds.length !== e.tokenIds.length) break;
        }
        const n = j - i;
        this.storedHead(n, e.salt !== null, e.group);
        for (let k = i; k < j; k++) this.hash((events[k] as typeof e).hash, 0);
        this.key(K.parent);
        if (e.parentHash !== null) this.hash(e.parentHash, 0);
        else this.w.nil();
        this.key(K.tokenIds);
        this.w.arrayHeader(n * e.tokenIds.length);
        for (let k = i; k < j; k++) {
          const t = (events[k] as typeof e).tokenIds;
          this.w.int32s(t, 0, t.length);
        }
        this.storedTail(n, e.tokenIds.length, e.medium, e.salt, e.group);
        i = j;
      } else if (e.type === 'removed') {
        let j = i + 1;
        while (j < events.length && events[j]!.type === 'removed' && sameSource(events[j] as typeof e, e)) j++;
        this.removedHead(j - i, e.group);
        for (let k = i; k < j; k++) this.hash((events[k] as typeof e).hash, 0);
        this.removedTail(e.medium, e.group);
        i = j;
      } else {
        this.cleared();
        i++;
      }
    }
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < 16; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameSource(a: { medium: string; group: KVCacheGroup }, b: { medium: string; group: KVCacheGroup }): boolean {
  return a.medium === b.medium && a.group.index === b.group.index && a.group.kind === b.group.kind && a.group.slidingWindow === b.group.slidingWindow;
}

// ---- event objects in, batches out ----

const INT32_MIN = -0x8000_0000;
const INT32_MAX = 0x7fff_ffff;

function checkHash(name: string, h: unknown): void {
  if (!(h instanceof Uint8Array) || h.length !== 16) throw new TypeError(`${name} must be a 16-byte Uint8Array, got ${describe(h)}`);
}

function checkGroup(name: string, g: unknown): void {
  checkObject(name, g);
  const o = g as Record<string, unknown>;
  checkInt(`${name}.index`, o['index'], 0);
  if (o['kind'] !== 'full_attention' && o['kind'] !== 'sliding_window') {
    throw new RangeError(`${name}.kind must be "full_attention" or "sliding_window", got ${describe(o['kind'])}`);
  }
  if (o['slidingWindow'] !== null) checkInt(`${name}.slidingWindow`, o['slidingWindow'], 1);
}

/** Throws a TypeError or RangeError naming the first malformed event; changes nothing. */
export function checkEvents(events: unknown): asserts events is readonly KVEvent[] {
  if (!Array.isArray(events)) throw new TypeError(`events must be an array of KV events, got ${describe(events)}`);
  events.forEach((e: unknown, i) => {
    const name = `events[${i}]`;
    checkObject(name, e);
    const o = e as Record<string, unknown>;
    const type = o['type'];
    if (type !== 'stored' && type !== 'removed' && type !== 'cleared') {
      throw new TypeError(`${name}.type must be "stored", "removed" or "cleared", got ${describe(type)}`);
    }
    checkInt(`${name}.dpRank`, o['dpRank'], 0);
    if (typeof o['medium'] !== 'string' || o['medium'] === '') throw new TypeError(`${name}.medium must be a non-empty string, got ${describe(o['medium'])}`);
    if (type === 'cleared') return;
    // Not on the wire: an event a router builds by hand may leave it out.
    if (o['blockId'] !== undefined) checkInt(`${name}.blockId`, o['blockId'], 0);
    checkHash(`${name}.hash`, o['hash']);
    checkGroup(`${name}.group`, o['group']);
    if (type === 'removed') return;
    if (o['parentHash'] !== null) checkHash(`${name}.parentHash`, o['parentHash']);
    const t = o['tokenIds'];
    if (!(t instanceof Int32Array)) {
      if (!Array.isArray(t)) throw new TypeError(`${name}.tokenIds must be an Int32Array or an array of int32 tokens, got ${describe(t)}`);
      t.forEach((v: unknown, k) => {
        if (typeof v !== 'number' || !Number.isInteger(v) || v < INT32_MIN || v > INT32_MAX) {
          throw new RangeError(`${name}.tokenIds[${k}] must be an int32 token id, got ${describe(v)}`);
        }
      });
    }
    if ((t as ArrayLike<number>).length === 0) throw new RangeError(`${name}.tokenIds must not be empty (a block holds at least one token)`);
    if (o['salt'] !== null && typeof o['salt'] !== 'string') throw new TypeError(`${name}.salt must be a string or null, got ${describe(o['salt'])}`);
    if (o['salt'] !== null && o['parentHash'] !== null) throw new RangeError(`${name}.salt is only for a sequence's first block (parentHash null)`);
  });
}

/**
 * Encodes drained events as vLLM KVEventBatch messages, one per dp rank that
 * has events (vLLM publishes per rank too), ranks in ascending order. Every
 * event is checked before anything is encoded.
 */
export function encodeVllmEventBatches(events: readonly KVEvent[], options: VllmEncodeOptions = {}): EncodedBatch[] {
  const o = parseWireOptions(options);
  checkEvents(events);
  const byRank = new Map<number, KVEvent[]>();
  for (const e of events) {
    let list = byRank.get(e.dpRank);
    if (!list) byRank.set(e.dpRank, (list = []));
    const t = (e as { tokenIds?: unknown }).tokenIds;
    list.push(Array.isArray(t) ? ({ ...e, tokenIds: Int32Array.from(t) } as KVEvent) : e);
  }
  const enc = new VllmWireEncoder(o);
  return [...byRank.keys()]
    .sort((a, b) => a - b)
    .map((dpRank) => {
      enc.reset();
      enc.beginBatch(o.ts);
      enc.events(byRank.get(dpRank)!);
      enc.endBatch(dpRank);
      return { dpRank, payload: enc.bytes().slice() };
    });
}

/**
 * Drains `pool`'s recorded events straight into vLLM KVEventBatch messages,
 * one per dp rank that has events, without making event objects (the form
 * for long replays and busy publishers). The same bytes as
 * `encodeVllmEventBatches(pool.drainEvents(), options)`.
 */
export function drainVllmEventBatches(pool: BlockManagerPool, options: VllmEncodeOptions = {}): EncodedBatch[] {
  if (pool === null || typeof pool !== 'object' || typeof (pool as { drainEventRecords?: unknown }).drainEventRecords !== 'function') {
    throw new TypeError(`pool must be a BlockManagerPool, got ${describe(pool)}`);
  }
  const o = parseWireOptions(options);
  const enc = new VllmWireEncoder(o);
  const out: EncodedBatch[] = [];
  drainInto(pool, enc, o.ts, (dpRank, start) => {
    out.push({ dpRank, payload: enc.bytes().slice(start) });
  });
  return out;
}

/**
 * @internal Drains `pool` into `enc`, one batch per rank with events; `done(rank, start)` after each.
 * `also` sees each stretch of raw records first (a reader of the same events that needs no bytes).
 */
export function drainInto(
  pool: BlockManagerPool,
  enc: VllmWireEncoder,
  ts: number,
  done: (dpRank: number, start: number) => void,
  also?: (dpRank: number, source: KVEventSource, rt: CoreInstance, ptr: number, len: number) => void,
): void {
  let rank = -1;
  try {
    pool.drainEventRecords((r, source, rt, ptr, len) => {
      also?.(r, source, rt, ptr, len);
      if (r !== rank) {
        if (rank >= 0) done(rank, enc.endBatch(rank));
        rank = r;
        enc.beginBatch(ts);
      }
      enc.records(source, rt, ptr, len, pool.saltNames);
    });
  } finally {
    if (rank >= 0) done(rank, enc.endBatch(rank));
  }
}
