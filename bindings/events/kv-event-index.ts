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

import { xxh3_128 } from '../hash.js';
import type { KVEvent } from '../managers/kv-events.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { checkEvents } from './vllm.js';
import { decodeVllmEventBatch, type VllmBlockHash, type VllmEventBatch } from './vllm-decode.js';

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
  /** Tokens per block; default: the block size of the first stored event. */
  blockSize?: number;
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

interface Node {
  /** The index's key, null while the parent is unknown. */
  key: string | null;
  parent: IndexedHash | null;
  tokens: Int32Array;
  extra: readonly unknown[] | null;
}

interface Source {
  readonly instance: string;
  readonly dpRank: number;
  readonly medium: string;
  /** Instance and rank together: a block counts for a rank on any of its media. */
  readonly rankKey: string;
  readonly blocks: Map<IndexedHash, Node>;
  /** Unkeyed blocks by the parent they wait for. */
  readonly waiting: Map<IndexedHash, Set<IndexedHash>>;
}

/** One stored run, whatever it came from. */
interface StoredRun {
  hashes: IndexedHash[];
  parent: IndexedHash | null;
  tokens: Int32Array;
  blockSize: number;
  loraName: string | null;
  /** Extra keys of the run's first block. */
  extra0: readonly unknown[] | null;
}

const MAIN_KINDS = new Set(['full_attention', 'mla_attention', 'sink_full_attention']);
const utf8 = new TextEncoder();
const U64 = (1n << 64n) - 1n;

/** A KVEvent's hash as a uint64 (the wire's integer form: the low 64 bits). */
function objectHash(h: Uint8Array): bigint {
  return new DataView(h.buffer, h.byteOffset, 16).getBigUint64(0, true);
}

function wireHash(h: VllmBlockHash): IndexedHash {
  if (typeof h === 'bigint') return h & U64;
  let s = '';
  for (const b of h) s += b.toString(16).padStart(2, '0');
  return s;
}

function latin1(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]!);
  return s;
}

function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return [...v];
  if (typeof v === 'bigint') return v.toString();
  if (Array.isArray(v)) return v.map(plain);
  return v;
}

export class KVEventIndex {
  private size: number | null;
  private readonly sources = new Map<string, Source>();
  /** The sources holding each key (the index's own chain key of a block). */
  private readonly holders = new Map<string, Source[]>();
  private buf = new Uint8Array(256);

  /** Events of KV-cache groups other than full attention (not indexed, as Dynamo drops them). */
  ignoredEvents = 0;

  constructor(options: KVEventIndexOptions = {}) {
    checkObject('options', options);
    checkKeys('options', options, ['blockSize']);
    this.size = options.blockSize === undefined ? null : checkInt('options.blockSize', options.blockSize, 1);
  }

  /** Tokens per block (null until the first stored event when not given). */
  get blockSize(): number | null {
    return this.size;
  }

  // ---- feeding ----

  /** Applies events drained from a kvpool pool (`pool.drainEvents()` or a snapshot) of `instance`. */
  apply(instance: string, events: readonly KVEvent[]): void {
    checkInstance(instance);
    checkEvents(events);
    for (const e of events) this.checkObjectBlockSize(e);
    for (let i = 0; i < events.length; ) {
      const e = events[i]!;
      if (e.type === 'cleared') {
        this.clearSource(instance, e.dpRank, e.medium);
        i++;
      } else if (e.type === 'removed') {
        if (this.mainGroup(e.group.kind, e.group.index)) this.remove(this.source(instance, e.dpRank, e.medium), [objectHash(e.hash)]);
        i++;
      } else {
        const run: StoredRun = {
          hashes: [objectHash(e.hash)],
          parent: e.parentHash === null ? null : objectHash(e.parentHash),
          tokens: Int32Array.from(e.tokenIds),
          blockSize: e.tokenIds.length,
          loraName: null,
          extra0: e.salt === null ? null : [e.salt],
        };
        if (this.mainGroup(e.group.kind, e.group.index)) this.store(this.source(instance, e.dpRank, e.medium), run);
        i++;
      }
    }
  }

  /**
   * Applies one KVEventBatch message (its payload, or decoded) published by
   * `instance`; `dpRank` stands in when the batch names none.
   */
  applyBatch(instance: string, batch: Uint8Array | VllmEventBatch, dpRank = 0): void {
    checkInstance(instance);
    checkInt('dpRank', dpRank, 0);
    const b = batch instanceof Uint8Array ? decodeVllmEventBatch(batch) : batch;
    checkObject('batch', b);
    const rank = b.dataParallelRank ?? dpRank;
    for (const e of b.events) {
      if (e.type === 'BlockStored' && e.blockSize !== (this.size ?? e.blockSize)) {
        throw new RangeError(`the index's blocks hold ${this.size} tokens, but a BlockStored event has block_size ${e.blockSize}`);
      }
    }
    for (const e of b.events) {
      if (e.type === 'AllBlocksCleared') {
        // vLLM's reset of the device cache; its other media keep their blocks.
        this.clearSource(instance, rank, 'GPU');
      } else if (e.type === 'BlockRemoved') {
        if (!this.mainGroup(null, e.groupIdx)) continue;
        this.remove(this.source(instance, rank, e.medium ?? 'GPU'), e.blockHashes.map(wireHash));
      } else {
        if (!this.mainGroup(e.kvCacheSpecKind, e.groupIdx)) continue;
        const run: StoredRun = {
          hashes: e.blockHashes.map(wireHash),
          parent: e.parentBlockHash === null ? null : wireHash(e.parentBlockHash),
          tokens: Int32Array.from(e.tokenIds),
          blockSize: e.blockSize,
          loraName: e.loraName,
          extra0: e.extraKeys?.[0] ?? null,
        };
        this.store(this.source(instance, rank, e.medium ?? 'GPU'), run);
      }
    }
  }

  /** Forgets everything `instance` published (it went away). */
  removeInstance(instance: string): void {
    checkInstance(instance);
    for (const [k, s] of this.sources) {
      if (s.instance !== instance) continue;
      this.clearBlocks(s);
      this.sources.delete(k);
    }
  }

  private checkObjectBlockSize(e: KVEvent): void {
    if (e.type !== 'stored') return;
    const n = e.tokenIds.length;
    if (this.size === null) this.size = n;
    else if (n !== this.size) throw new RangeError(`the index's blocks hold ${this.size} tokens, but a stored event has ${n}`);
  }

  private mainGroup(kind: string | null, index: number | null): boolean {
    const main = kind === null ? index === null || index === 0 : MAIN_KINDS.has(kind);
    if (!main) this.ignoredEvents++;
    return main;
  }

  private source(instance: string, dpRank: number, medium: string): Source {
    const k = `${instance}\u0000${dpRank}\u0000${medium}`;
    let s = this.sources.get(k);
    if (s === undefined) {
      s = { instance, dpRank, medium, rankKey: `${instance}\u0000${dpRank}`, blocks: new Map(), waiting: new Map() };
      this.sources.set(k, s);
    }
    return s;
  }

  private store(s: Source, run: StoredRun): void {
    const B = run.blockSize;
    if (this.size === null) this.size = B;
    const n = run.hashes.length;
    if (run.tokens.length !== n * B) {
      throw new RangeError(`a stored run of ${n} blocks of ${B} tokens carries ${run.tokens.length} tokens`);
    }
    let parent = run.parent;
    for (let i = 0; i < n; i++) {
      const h = run.hashes[i]!;
      this.drop(s, h);
      const node: Node = { key: null, parent, tokens: run.tokens.slice(i * B, (i + 1) * B), extra: i === 0 && run.parent === null ? run.extra0 : null };
      s.blocks.set(h, node);
      if (parent === null) this.keyNode(s, h, node, rootKey(run.loraName, run.extra0));
      else {
        const p = s.blocks.get(parent);
        if (p !== undefined && p.key !== null) this.keyNode(s, h, node, p.key);
        else {
          let set = s.waiting.get(parent);
          if (set === undefined) s.waiting.set(parent, (set = new Set()));
          set.add(h);
        }
      }
      parent = h;
    }
  }

  /** Keys `node` (hash `h`) on its parent's key, then every block that waited for it. */
  private keyNode(s: Source, h: IndexedHash, node: Node, parentKey: string | null): void {
    const todo: Array<[IndexedHash, Node, string | null]> = [[h, node, parentKey]];
    for (let item = todo.pop(); item !== undefined; item = todo.pop()) {
      const [hash, n, pk] = item;
      const key = this.keyOf(pk, n.tokens, 0, n.tokens.length);
      n.key = key;
      let list = this.holders.get(key);
      if (list === undefined) this.holders.set(key, (list = []));
      if (!list.includes(s)) list.push(s);
      const kids = s.waiting.get(hash);
      if (kids === undefined) continue;
      s.waiting.delete(hash);
      for (const c of kids) {
        const child = s.blocks.get(c);
        if (child !== undefined && child.key === null && child.parent === hash) todo.push([c, child, key]);
      }
    }
  }

  private remove(s: Source, hashes: readonly IndexedHash[]): void {
    for (const h of hashes) this.drop(s, h);
  }

  /** Forgets block `h` of `s` (keyed or waiting); blocks keyed on it keep their keys. */
  private drop(s: Source, h: IndexedHash): void {
    const node = s.blocks.get(h);
    if (node === undefined) return;
    s.blocks.delete(h);
    if (node.key !== null) this.unhold(s, node.key);
    else if (node.parent !== null) {
      const set = s.waiting.get(node.parent);
      set?.delete(h);
      if (set?.size === 0) s.waiting.delete(node.parent);
    }
  }

  private unhold(s: Source, key: string): void {
    const list = this.holders.get(key);
    if (list === undefined) return;
    const i = list.indexOf(s);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.holders.delete(key);
  }

  private clearSource(instance: string, dpRank: number, medium: string): void {
    const s = this.sources.get(`${instance}\u0000${dpRank}\u0000${medium}`);
    if (s !== undefined) this.clearBlocks(s);
  }

  private clearBlocks(s: Source): void {
    for (const node of s.blocks.values()) if (node.key !== null) this.unhold(s, node.key);
    s.blocks.clear();
    s.waiting.clear();
  }

  /** The key of a block: its parent's key (or none) chained with its tokens (int32 little endian). */
  private keyOf(parent: string | null, tokens: ArrayLike<number>, at: number, B: number): string {
    const head = parent === null ? 0 : 16;
    const need = head + B * 4;
    if (this.buf.length < need) this.buf = new Uint8Array(need * 2);
    const buf = this.buf;
    for (let i = 0; i < head; i++) buf[i] = parent!.charCodeAt(i);
    const dv = new DataView(buf.buffer);
    for (let i = 0; i < B; i++) dv.setInt32(head + i * 4, tokens[at + i]!, true);
    return latin1(xxh3_128(buf.subarray(0, need)));
  }

  // ---- queries ----

  /**
   * For every source (instance, dp rank, medium) holding the first block of
   * `tokens`, how many leading blocks it holds; longest first.
   */
  match(tokens: ArrayLike<number>, query: PrefixQuery = {}): PrefixMatch[] {
    const keys = this.queryKeys(tokens, query);
    const media = parseMedia(query);
    const out: PrefixMatch[] = [];
    if (keys.length === 0) return out;
    let alive = (this.holders.get(keys[0]!) ?? []).filter((s) => media === null || media.has(s.medium));
    const count = new Map<Source, number>(alive.map((s) => [s, 1]));
    for (let i = 1; i < keys.length && alive.length > 0; i++) {
      const here = this.holders.get(keys[i]!);
      alive = here === undefined ? [] : alive.filter((s) => here.includes(s));
      for (const s of alive) count.set(s, i + 1);
    }
    for (const [s, blocks] of count) out.push({ instance: s.instance, dpRank: s.dpRank, medium: s.medium, blocks });
    return out.sort((a, b) => b.blocks - a.blocks || cmp(a.instance, b.instance) || a.dpRank - b.dpRank || cmp(a.medium, b.medium));
  }

  /**
   * The longest prefix of `tokens`, in blocks, that each instance holds on
   * one dp rank (a block counts when the rank holds it on any medium of the
   * query, so a host tier continues the device's prefix). Instances holding
   * no block of it are absent.
   */
  longestPrefix(tokens: ArrayLike<number>, query: PrefixQuery = {}): Map<string, number> {
    const keys = this.queryKeys(tokens, query);
    const media = parseMedia(query);
    const best = new Map<string, number>();
    if (keys.length === 0) return best;
    const ranksOf = (key: string): Map<string, string> => {
      const m = new Map<string, string>();
      for (const s of this.holders.get(key) ?? []) if (media === null || media.has(s.medium)) m.set(s.rankKey, s.instance);
      return m;
    };
    let alive = ranksOf(keys[0]!);
    for (let i = 0; alive.size > 0; ) {
      for (const instance of alive.values()) best.set(instance, Math.max(best.get(instance) ?? 0, i + 1));
      if (++i >= keys.length) break;
      const here = ranksOf(keys[i]!);
      for (const k of [...alive.keys()]) if (!here.has(k)) alive.delete(k);
    }
    return best;
  }

  private queryKeys(tokens: ArrayLike<number>, query: PrefixQuery): string[] {
    if (tokens === null || typeof tokens !== 'object' || typeof (tokens as ArrayLike<number>).length !== 'number') {
      throw new TypeError(`tokens must be an Int32Array or an array of int32 token ids, got ${describe(tokens)}`);
    }
    checkObject('query', query);
    checkKeys('query', query, ['salt', 'loraName', 'media']);
    const salt = query.salt ?? null;
    const lora = query.loraName ?? null;
    if (salt !== null && typeof salt !== 'string') throw new TypeError(`query.salt must be a string or null, got ${describe(salt)}`);
    if (lora !== null && typeof lora !== 'string') throw new TypeError(`query.loraName must be a string or null, got ${describe(lora)}`);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (typeof t !== 'number' || (t | 0) !== t) throw new RangeError(`tokens[${i}] must be an int32 token id, got ${describe(t)}`);
    }
    const B = this.size;
    if (B === null) return [];
    const n = Math.floor(tokens.length / B);
    const keys: string[] = [];
    let parent = rootKey(lora, salt === null || salt === '' ? null : [salt]);
    for (let b = 0; b < n; b++) {
      parent = this.keyOf(parent, tokens, b * B, B);
      keys.push(parent);
    }
    return keys;
  }

  // ---- what it holds ----

  /** Every source and how many blocks it holds (`waiting`: of them, blocks whose parent is not announced, so not reachable yet). */
  sourcesInfo(): IndexSourceInfo[] {
    return [...this.sources.values()].map((s) => {
      let waiting = 0;
      for (const set of s.waiting.values()) waiting += set.size;
      return { instance: s.instance, dpRank: s.dpRank, medium: s.medium, blocks: s.blocks.size, waiting };
    });
  }

  /** The blocks one source holds, as announced (order: as stored). */
  blocks(instance: string, dpRank = 0, medium = 'GPU'): IndexedBlock[] {
    checkInstance(instance);
    checkInt('dpRank', dpRank, 0);
    const s = this.sources.get(`${instance}\u0000${dpRank}\u0000${medium}`);
    if (s === undefined) return [];
    return [...s.blocks].map(([hash, n]) => ({ hash, parentHash: n.parent, tokenIds: n.tokens.slice(), extraKeys: n.extra, keyed: n.key !== null }));
  }
}

/** The parent key of a sequence's first block: none, or its LoRA and extra keys (a salt). */
function rootKey(lora: string | null, extra: readonly unknown[] | null): string | null {
  if (lora === null && (extra === null || extra.length === 0)) return null;
  return latin1(xxh3_128(utf8.encode(JSON.stringify([lora, extra === null ? [] : plain(extra)]))));
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
