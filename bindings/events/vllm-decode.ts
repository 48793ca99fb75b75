// Reading vLLM KVEventBatch messages, both event forms (maps with a "type"
// key, vLLM 0.26 on; positional arrays before): what a router written in
// JavaScript needs to follow kvpool or vLLM itself (KVEventIndex uses it).

import { Decoder } from '@msgpack/msgpack';
import { describe } from '../validate.js';

/** A block hash as sent: an integer (uint64, or int64 from some producers) or bytes. */
export type VllmBlockHash = bigint | Uint8Array;

export interface VllmBlockStored {
  type: 'BlockStored';
  blockHashes: VllmBlockHash[];
  parentBlockHash: VllmBlockHash | null;
  tokenIds: number[];
  blockSize: number;
  loraId: number | null;
  medium: string | null;
  loraName: string | null;
  /** Per block, the extra hash keys (a salt, LoRA, multimodal ids), or null. */
  extraKeys: (unknown[] | null)[] | null;
  groupIdx: number | null;
  kvCacheSpecKind: string | null;
  kvCacheSpecSlidingWindow: number | null;
}

export interface VllmBlockRemoved {
  type: 'BlockRemoved';
  blockHashes: VllmBlockHash[];
  medium: string | null;
  groupIdx: number | null;
}

export interface VllmAllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type VllmEvent = VllmBlockStored | VllmBlockRemoved | VllmAllBlocksCleared;

export interface VllmEventBatch {
  ts: number;
  events: VllmEvent[];
  /** null when the producer left it out. */
  dataParallelRank: number | null;
}

const decoder = new Decoder({ useBigInt64: true });

function fail(what: string, got: unknown): never {
  throw new TypeError(`kvpool: not a vLLM KV event batch: ${what}, got ${describe(got)}`);
}

function num(what: string, v: unknown): number {
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) fail(`${what} must be a safe integer`, v);
    return Number(v);
  }
  if (typeof v !== 'number' || !Number.isInteger(v)) fail(`${what} must be an integer`, v);
  return v;
}

function optNum(what: string, v: unknown): number | null {
  return v === null || v === undefined ? null : num(what, v);
}

function optStr(what: string, v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== 'string') fail(`${what} must be a string`, v);
  return v;
}

function hashOf(what: string, v: unknown): VllmBlockHash {
  if (typeof v === 'bigint') return BigInt.asUintN(64, v);
  // A float beyond 2^53 names no hash exactly: refused rather than rounded into another.
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt.asUintN(64, BigInt(v));
  if (v instanceof Uint8Array) return v;
  return fail(`${what} must be an integer (int64, uint64 or a safe integer) or bytes`, v);
}

function hashes(what: string, v: unknown): VllmBlockHash[] {
  if (!Array.isArray(v)) fail(`${what} must be an array`, v);
  return v.map((h, i) => hashOf(`${what}[${i}]`, h));
}

/** A BlockStored's or BlockRemoved's fields by name, from either form. */
function fieldsOf(e: unknown): { tag: string; get: (name: string, index: number) => unknown } {
  if (Array.isArray(e)) {
    if (typeof e[0] !== 'string') fail('a positional event must start with its tag', e[0]);
    return { tag: e[0], get: (_name, index) => e[index] };
  }
  if (e !== null && typeof e === 'object' && !(e instanceof Uint8Array)) {
    const o = e as Record<string, unknown>;
    if (typeof o['type'] !== 'string') fail('an event map must have a string "type"', o['type']);
    return { tag: o['type'], get: (name) => o[name] };
  }
  return fail('an event must be an array or a map', e);
}

function decodeEvent(e: unknown, at: string): VllmEvent {
  const { tag, get } = fieldsOf(e);
  if (tag === 'BlockStored') {
    const tokens = get('token_ids', 3);
    if (!Array.isArray(tokens)) fail(`${at}.token_ids must be an array`, tokens);
    const extra = get('extra_keys', 8);
    if (extra !== null && extra !== undefined && !Array.isArray(extra)) fail(`${at}.extra_keys must be an array`, extra);
    const parent = get('parent_block_hash', 2);
    return {
      type: 'BlockStored',
      blockHashes: hashes(`${at}.block_hashes`, get('block_hashes', 1)),
      parentBlockHash: parent === null || parent === undefined ? null : hashOf(`${at}.parent_block_hash`, parent),
      tokenIds: tokens.map((t, i) => num(`${at}.token_ids[${i}]`, t)),
      blockSize: num(`${at}.block_size`, get('block_size', 4)),
      loraId: optNum(`${at}.lora_id`, get('lora_id', 5)),
      medium: optStr(`${at}.medium`, get('medium', 6)),
      loraName: optStr(`${at}.lora_name`, get('lora_name', 7)),
      extraKeys: extra === null || extra === undefined ? null : (extra as unknown[]).map((k) => (Array.isArray(k) ? k : null)),
      groupIdx: optNum(`${at}.group_idx`, get('group_idx', 9)),
      kvCacheSpecKind: optStr(`${at}.kv_cache_spec_kind`, get('kv_cache_spec_kind', 10)),
      kvCacheSpecSlidingWindow: optNum(`${at}.kv_cache_spec_sliding_window`, get('kv_cache_spec_sliding_window', 11)),
    };
  }
  if (tag === 'BlockRemoved') {
    return {
      type: 'BlockRemoved',
      blockHashes: hashes(`${at}.block_hashes`, get('block_hashes', 1)),
      medium: optStr(`${at}.medium`, get('medium', 2)),
      groupIdx: optNum(`${at}.group_idx`, get('group_idx', 3)),
    };
  }
  if (tag === 'AllBlocksCleared') return { type: 'AllBlocksCleared' };
  return fail(`${at} has an unknown tag`, tag);
}

/** Decodes one KVEventBatch payload (either event form); a TypeError when it is not one. */
export function decodeVllmEventBatch(payload: Uint8Array): VllmEventBatch {
  if (!(payload instanceof Uint8Array)) throw new TypeError(`payload must be a Uint8Array, got ${describe(payload)}`);
  // msgpack's own words for this case name a buffer, not a payload.
  if (payload.length === 0) throw new TypeError('kvpool: not a vLLM KV event batch: the payload is empty');
  let v: unknown;
  try {
    v = decoder.decode(payload);
  } catch (e) {
    throw new TypeError(`kvpool: not a vLLM KV event batch: ${(e as Error).message}`);
  }
  return batchOf(v);
}

/** Decodes batches written one after another (a `kvpool replay --events` file). */
export function decodeVllmEventBatches(bytes: Uint8Array): VllmEventBatch[] {
  if (!(bytes instanceof Uint8Array)) throw new TypeError(`bytes must be a Uint8Array, got ${describe(bytes)}`);
  const out: VllmEventBatch[] = [];
  try {
    for (const v of decoder.decodeMulti(bytes)) out.push(batchOf(v));
  } catch (e) {
    if (e instanceof TypeError && e.message.startsWith('kvpool:')) throw e;
    throw new TypeError(`kvpool: not a vLLM KV event batch: ${(e as Error).message}`);
  }
  return out;
}

function batchOf(v: unknown): VllmEventBatch {
  if (!Array.isArray(v) || v.length < 2 || v.length > 3) fail('a batch is the array [ts, events, data_parallel_rank]', v);
  const [ts, events, rank] = v as [unknown, unknown, unknown];
  if (typeof ts !== 'number') fail('ts must be a number', ts);
  if (!Array.isArray(events)) fail('events must be an array', events);
  return { ts, events: events.map((e, i) => decodeEvent(e, `events[${i}]`)), dataParallelRank: optNum('data_parallel_rank', rank) };
}
