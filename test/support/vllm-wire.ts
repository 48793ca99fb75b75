// A strict reader of vLLM KV-event batches, written from vLLM's definitions
// (vllm/distributed/kv_events.py: EventBatch, KVCacheEvent subclasses with
// tag=True and omit_defaults=True, array_like for the batch, and for the
// events before vLLM 0.26) and not from kvpool's encoder: tests decode
// kvpool's bytes with it. msgpack itself is read by @msgpack/msgpack.
//
// What it enforces is what vLLM's own msgspec decoder enforces: every field
// without a default must be there (BlockStored: block_hashes through
// lora_name; BlockRemoved: block_hashes and medium), types must match, a
// positional event has at most as many elements as its struct has fields.
// It also says which form each event came in.

import { decode, decodeMulti } from '@msgpack/msgpack';
import type { VllmEvent, VllmEventBatch } from '../../bindings/events/vllm-decode.js';

const STORED_FIELDS = [
  'block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name',
  'extra_keys', 'group_idx', 'kv_cache_spec_kind', 'kv_cache_spec_sliding_window',
] as const;
/** Fields without a default: required. */
const STORED_REQUIRED = 7;
const REMOVED_FIELDS = ['block_hashes', 'medium', 'group_idx'] as const;
const REMOVED_REQUIRED = 2;

export interface ReadBatch extends VllmEventBatch {
  /** The form of each event. */
  forms: Array<'map' | 'positional'>;
}

function bad(msg: string): never {
  throw new Error(`not a vLLM KV event batch: ${msg}`);
}

function isInt(v: unknown): boolean {
  return (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint';
}

function hash(v: unknown, what: string): bigint | Uint8Array {
  if (v instanceof Uint8Array) return v;
  if (!isInt(v)) bad(`${what} is ${typeof v}, not an int or bytes`);
  const n = BigInt(v as number | bigint);
  if (n < -(1n << 63n) || n >= 1n << 64n) bad(`${what} = ${n} does not fit 64 bits`);
  return BigInt.asUintN(64, n);
}

function optInt(v: unknown, what: string): number | null {
  if (v === null || v === undefined) return null;
  if (!isInt(v)) bad(`${what} must be an int or None`);
  return Number(v);
}

function optStr(v: unknown, what: string): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== 'string') bad(`${what} must be a str or None`);
  return v;
}

/** The event's fields by name, from a positional array or a map; checks the required ones are there. */
function fields(e: unknown, names: readonly string[], required: number, tag: string): [Record<string, unknown>, 'map' | 'positional'] {
  if (Array.isArray(e)) {
    if (e.length - 1 < required) bad(`${tag} array has ${e.length - 1} fields, vLLM requires ${required}`);
    if (e.length - 1 > names.length) bad(`${tag} array has ${e.length - 1} fields, the struct has ${names.length}`);
    return [Object.fromEntries(names.map((n, i) => [n, e[i + 1]])), 'positional'];
  }
  const o = e as Record<string, unknown>;
  for (const n of names.slice(0, required)) if (!(n in o)) bad(`${tag} map lacks required field ${n}`);
  return [o, 'map'];
}

function event(e: unknown, i: number): [VllmEvent, 'map' | 'positional'] {
  let tag: unknown;
  if (Array.isArray(e)) tag = e[0];
  else if (e !== null && typeof e === 'object' && !(e instanceof Uint8Array)) tag = (e as Record<string, unknown>)['type'];
  else bad(`events[${i}] is neither an array nor a map`);
  if (tag === 'BlockStored') {
    const [f, form] = fields(e, STORED_FIELDS, STORED_REQUIRED, 'BlockStored');
    if (!Array.isArray(f['block_hashes'])) bad('block_hashes must be a list');
    if (!Array.isArray(f['token_ids']) || !f['token_ids'].every(isInt)) bad('token_ids must be a list of int');
    if (!isInt(f['block_size'])) bad('block_size must be an int');
    const extra = f['extra_keys'];
    if (extra !== null && extra !== undefined && (!Array.isArray(extra) || !extra.every((k) => k === null || Array.isArray(k)))) {
      bad('extra_keys must be a list of tuples or None');
    }
    const parent = f['parent_block_hash'];
    return [
      {
        type: 'BlockStored',
        blockHashes: (f['block_hashes'] as unknown[]).map((h, k) => hash(h, `block_hashes[${k}]`)),
        parentBlockHash: parent === null ? null : hash(parent, 'parent_block_hash'),
        tokenIds: (f['token_ids'] as unknown[]).map(Number),
        blockSize: Number(f['block_size']),
        loraId: optInt(f['lora_id'], 'lora_id'),
        medium: optStr(f['medium'], 'medium'),
        loraName: optStr(f['lora_name'], 'lora_name'),
        extraKeys: (extra as (unknown[] | null)[] | undefined) ?? null,
        groupIdx: optInt(f['group_idx'], 'group_idx'),
        kvCacheSpecKind: optStr(f['kv_cache_spec_kind'], 'kv_cache_spec_kind'),
        kvCacheSpecSlidingWindow: optInt(f['kv_cache_spec_sliding_window'], 'kv_cache_spec_sliding_window'),
      },
      form,
    ];
  }
  if (tag === 'BlockRemoved') {
    const [f, form] = fields(e, REMOVED_FIELDS, REMOVED_REQUIRED, 'BlockRemoved');
    if (!Array.isArray(f['block_hashes'])) bad('block_hashes must be a list');
    return [
      {
        type: 'BlockRemoved',
        blockHashes: (f['block_hashes'] as unknown[]).map((h, k) => hash(h, `block_hashes[${k}]`)),
        medium: optStr(f['medium'], 'medium'),
        groupIdx: optInt(f['group_idx'], 'group_idx'),
      },
      form,
    ];
  }
  if (tag === 'AllBlocksCleared') {
    if (Array.isArray(e) && e.length !== 1) bad('AllBlocksCleared has no fields');
    return [{ type: 'AllBlocksCleared' }, Array.isArray(e) ? 'positional' : 'map'];
  }
  return bad(`events[${i}] has tag ${JSON.stringify(tag)}`);
}

/** Reads one KVEventBatch payload: [ts: float, events, data_parallel_rank (omitted when None)]. */
export function readBatch(payload: Uint8Array): ReadBatch {
  return readValue(decode(payload, { useBigInt64: true }));
}

/** Reads a file of concatenated batches (kvpool replay --events). */
export function readBatches(bytes: Uint8Array): ReadBatch[] {
  return [...decodeMulti(bytes, { useBigInt64: true })].map(readValue);
}

function readValue(v: unknown): ReadBatch {
  if (!Array.isArray(v) || v.length < 2 || v.length > 3) bad('the batch is not an array of 2 or 3');
  const [ts, events, rank] = v as unknown[];
  if (typeof ts !== 'number') bad('ts must be a float');
  if (!Array.isArray(events)) bad('events must be a list');
  const read = events.map(event);
  return { ts, events: read.map(([e]) => e), forms: read.map(([, f]) => f), dataParallelRank: optInt(rank, 'data_parallel_rank') };
}
