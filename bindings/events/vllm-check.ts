// The whole check of a KVEventBatch before a KVEventIndex applies any of it:
// shapes, value ranges and the index's limits, so that a refused batch
// leaves nothing behind and the refusal names the event and the field
// (docs/events.md, limits). A decoded payload and a batch object built by
// hand take the same check; field names are the wire's for a payload and
// the object's for an object.

import { describe } from '../validate.js';
import type { KVEventIndexLimits } from './index-limits.js';
import type { VllmEventBatch } from './vllm-decode.js';

const INT32_MIN = -0x8000_0000;
const INT32_MAX = 0x7fff_ffff;
const U64_END = 1n << 64n;
const I64_MIN = -(1n << 63n);
const EVENT_KEYS: Record<string, readonly string[]> = {
  BlockStored: ['type', 'blockHashes', 'parentBlockHash', 'tokenIds', 'blockSize', 'loraId', 'medium', 'loraName', 'extraKeys', 'groupIdx', 'kvCacheSpecKind', 'kvCacheSpecSlidingWindow'],
  BlockRemoved: ['type', 'blockHashes', 'medium', 'groupIdx'],
  AllBlocksCleared: ['type'],
};
const SNAKE: Record<string, string> = {
  blockHashes: 'block_hashes',
  parentBlockHash: 'parent_block_hash',
  tokenIds: 'token_ids',
  blockSize: 'block_size',
  loraId: 'lora_id',
  loraName: 'lora_name',
  extraKeys: 'extra_keys',
  groupIdx: 'group_idx',
  kvCacheSpecKind: 'kv_cache_spec_kind',
  kvCacheSpecSlidingWindow: 'kv_cache_spec_sliding_window',
  dataParallelRank: 'data_parallel_rank',
};

/** What a refusal says it got, in words (a size, not the value). */
class Said {
  constructor(readonly text: string) {}
}

class Checker {
  constructor(
    private readonly lim: KVEventIndexLimits,
    private readonly wire: boolean,
  ) {}

  field(k: string): string {
    return this.wire ? (SNAKE[k] ?? k) : k;
  }

  type(what: string, want: string, got: unknown): never {
    throw new TypeError(`${what} must be ${want}, got ${describe(got)}`);
  }

  range(what: string, want: string, got: unknown): never {
    throw new RangeError(`${what} must be ${want}, got ${got instanceof Said ? got.text : describe(got)}`);
  }

  int(what: string, v: unknown, min: number, max: number): number {
    if (typeof v !== 'number' || !Number.isInteger(v)) return this.type(what, 'an integer', v);
    if (v < min || v > max) return this.range(what, `an integer in [${min}, ${max}]`, v);
    return v;
  }

  optInt(what: string, v: unknown, min: number, max: number): void {
    if (v !== null && v !== undefined) this.int(what, v, min, max);
  }

  str(what: string, v: unknown, optional: boolean): void {
    if (v === null || v === undefined) {
      if (optional) return;
      this.type(what, 'a string', v);
    }
    if (typeof v !== 'string') this.type(what, 'a string', v);
    if (v.length > this.lim.maxNameLength) this.range(what, `at most ${this.lim.maxNameLength} characters long (limits.maxNameLength)`, new Said(`a string of ${v.length}`));
  }

  hash(what: string, h: unknown): void {
    if (typeof h === 'bigint') {
      if (h < I64_MIN || h >= U64_END) this.range(what, 'a uint64 or int64', h);
    } else if (typeof h === 'number') {
      if (!Number.isSafeInteger(h)) this.type(what, 'an integer (a safe one, or a bigint) or bytes', h);
    } else if (h instanceof Uint8Array) {
      if (h.length === 0 || h.length > this.lim.maxHashBytes) this.range(what, `1 to ${this.lim.maxHashBytes} bytes (limits.maxHashBytes)`, new Said(`${h.length} bytes`));
    } else this.type(what, 'an integer or bytes', h);
  }

  hashes(what: string, v: unknown): number {
    if (!Array.isArray(v)) return this.type(what, 'an array of block hashes', v);
    if (v.length === 0) this.range(what, 'a non-empty array', v);
    if (v.length > this.lim.maxHashesPerEvent) this.range(what, `at most ${this.lim.maxHashesPerEvent} hashes (limits.maxHashesPerEvent)`, v);
    for (let i = 0; i < v.length; i++) this.hash(`${what}[${i}]`, v[i]);
    return v.length;
  }

  /** One block's extra keys: scalars, bytes and arrays of them, nested at most maxExtraKeyDepth deep. */
  extra(what: string, v: unknown): void {
    let values = 0;
    const walk = (x: unknown, path: string, depth: number): void => {
      if (++values > this.lim.maxExtraKeyValues) this.range(what, `at most ${this.lim.maxExtraKeyValues} values (limits.maxExtraKeyValues)`, new Said('more'));
      if (Array.isArray(x)) {
        if (depth >= this.lim.maxExtraKeyDepth) this.range(path, `nested at most ${this.lim.maxExtraKeyDepth} deep (limits.maxExtraKeyDepth)`, x);
        for (let i = 0; i < x.length; i++) walk(x[i], `${path}[${i}]`, depth + 1);
      } else if (typeof x === 'string') this.str(path, x, false);
      else if (typeof x === 'bigint') {
        if (x < I64_MIN || x >= U64_END) this.range(path, 'an int64 or uint64', x);
      } else if (typeof x === 'number') {
        if (!Number.isFinite(x)) this.range(path, 'a finite number', x);
      } else if (x instanceof Uint8Array) {
        if (x.length > this.lim.maxHashBytes) this.range(path, `at most ${this.lim.maxHashBytes} bytes (limits.maxHashBytes)`, new Said(`${x.length} bytes`));
      } else if (x !== null && typeof x !== 'boolean') this.type(path, 'a string, number, bytes, boolean, null or an array of them', x);
    };
    walk(v, what, 0);
  }

  event(e: unknown, at: string): void {
    if (e === null || typeof e !== 'object' || Array.isArray(e)) this.type(at, 'an event object', e);
    const o = e as Record<string, unknown>;
    const keys = EVENT_KEYS[o['type'] as string];
    if (typeof o['type'] !== 'string' || keys === undefined) this.range(`${at}.type`, `one of ${Object.keys(EVENT_KEYS).join(', ')}`, o['type']);
    for (const k of Object.keys(o)) if (!keys.includes(k)) throw new TypeError(`${at} (${o['type']}) has an unknown field ${JSON.stringify(k)}`);
    if (o['type'] === 'AllBlocksCleared') return;
    const f = (k: string) => `${at}.${this.field(k)}`;
    const n = this.hashes(f('blockHashes'), o['blockHashes']);
    this.str(f('medium'), o['medium'], true);
    this.optInt(f('groupIdx'), o['groupIdx'], 0, INT32_MAX);
    if (o['type'] === 'BlockRemoved') return;
    const B = this.int(f('blockSize'), o['blockSize'], 1, this.lim.maxBlockSize);
    if (o['parentBlockHash'] !== null && o['parentBlockHash'] !== undefined) this.hash(f('parentBlockHash'), o['parentBlockHash']);
    const t = o['tokenIds'];
    if (!Array.isArray(t)) this.type(f('tokenIds'), 'an array of int32 token ids', t);
    if (t.length !== n * B) this.range(f('tokenIds'), `${n} blocks of ${B} tokens (${n * B} token ids)`, t);
    for (let i = 0; i < t.length; i++) {
      const v = t[i];
      if (typeof v !== 'number' || (v | 0) !== v) {
        if (typeof v === 'number' && Number.isInteger(v) && (v < INT32_MIN || v > INT32_MAX)) this.range(`${f('tokenIds')}[${i}]`, 'an int32 token id', v);
        this.type(`${f('tokenIds')}[${i}]`, 'an int32 token id', v);
      }
    }
    this.optInt(f('loraId'), o['loraId'], INT32_MIN, INT32_MAX);
    this.str(f('loraName'), o['loraName'], true);
    this.str(f('kvCacheSpecKind'), o['kvCacheSpecKind'], true);
    this.optInt(f('kvCacheSpecSlidingWindow'), o['kvCacheSpecSlidingWindow'], 0, INT32_MAX);
    const x = o['extraKeys'];
    if (x === null || x === undefined) return;
    if (!Array.isArray(x)) this.type(f('extraKeys'), 'an array (one entry per block) or null', x);
    if (x.length > n) this.range(f('extraKeys'), `at most one entry per block (${n})`, x);
    for (let i = 0; i < x.length; i++) {
      const k = x[i];
      if (k === null || k === undefined) continue;
      if (!Array.isArray(k)) this.type(`${f('extraKeys')}[${i}]`, 'an array or null', k);
      this.extra(`${f('extraKeys')}[${i}]`, k);
    }
  }
}

/**
 * Throws (TypeError for a wrong type, RangeError for a value out of range)
 * unless `b` is a KVEventBatch every event of which the index can apply;
 * `wire`: name fields as the wire does (a decoded payload).
 */
export function checkVllmBatch(b: unknown, lim: KVEventIndexLimits, wire: boolean): asserts b is VllmEventBatch {
  const c = new Checker(lim, wire);
  if (b === null || typeof b !== 'object' || Array.isArray(b) || b instanceof Uint8Array) c.type('the batch', 'a Uint8Array payload or a decoded batch object', b);
  const o = b as Record<string, unknown>;
  if (typeof o['ts'] !== 'number' || !Number.isFinite(o['ts'])) c.type('ts', 'a finite number', o['ts']);
  const rank = o['dataParallelRank'];
  if (rank !== null && rank !== undefined) c.int(c.field('dataParallelRank'), rank, 0, lim.maxDpRank);
  const events: unknown = o['events'];
  if (!Array.isArray(events)) return c.type('events', 'an array of events', events);
  if (events.length > lim.maxEventsPerBatch) c.range('events', `at most ${lim.maxEventsPerBatch} events (limits.maxEventsPerBatch)`, events);
  for (let i = 0; i < events.length; i++) c.event(events[i], `events[${i}]`);
}
