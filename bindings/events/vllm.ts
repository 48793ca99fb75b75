// vLLM's KV-event wire format, so routers that consume vLLM's events (llm-d's
// KV-cache indexer, NVIDIA Dynamo's KV router) can consume ours.
//
// vLLM publishes msgspec structs encoded as msgpack ARRAYS (array_like): a
// KVEventBatch is [ts, events, data_parallel_rank] and each event is its tag
// followed by its fields in declaration order:
//   ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
//   ["BlockRemoved", block_hashes, medium]
//   ["AllBlocksCleared"]
// One BlockStored carries a chain of blocks (each the parent of the next, the
// first chained on parent_block_hash), as vLLM emits per cached run; we merge
// consecutive stored events that chain, and consecutive removals.

import { Encoder } from '@msgpack/msgpack';
import type { KVEvent } from '../managers/kv-events.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';

/**
 * How block hashes go on the wire: `'uint64'` (the default, as vLLM with
 * VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES): the low 64 bits of the XXH3-128 key;
 * `'bytes'`: all 16 bytes (low 64 bits then high 64 bits, little endian).
 */
export type BlockHashFormat = 'uint64' | 'bytes';

export interface VllmEncodeOptions {
  /** Batch timestamp in seconds (default: now). */
  ts?: number;
  /** Default 'uint64'. */
  blockHashes?: BlockHashFormat;
  /** The `medium` field (default "GPU", as vLLM; null for none). */
  medium?: string | null;
  /** Tokens per block (the `block_size` field); default: the first stored event's token count. */
  blockSize?: number;
}

const OPTION_KEYS = ['ts', 'blockHashes', 'medium', 'blockSize'] as const;

/** A batch for one dp rank, ready to publish. */
export interface EncodedBatch {
  dpRank: number;
  payload: Uint8Array;
}

/** The topic vLLM publishes KV events on: `kv@<instance>@<model>`. */
export function kvEventsTopic(instance: string, model: string): string {
  if (typeof instance !== 'string') throw new TypeError(`instance must be a string, got ${describe(instance)}`);
  if (typeof model !== 'string') throw new TypeError(`model must be a string, got ${describe(model)}`);
  return `kv@${instance}@${model}`;
}

const encoder = new Encoder({ useBigInt64: true });

function wireHash(h: Uint8Array, format: BlockHashFormat): bigint | Uint8Array {
  if (format === 'bytes') return h;
  return new DataView(h.buffer, h.byteOffset, 16).getBigUint64(0, true);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < 16; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** vLLM's event arrays for one rank's events (in order). */
export function toVllmEvents(events: readonly KVEvent[], format: BlockHashFormat, medium: string | null, blockSize: number): unknown[] {
  const out: unknown[] = [];
  let i = 0;
  while (i < events.length) {
    const e = events[i]!;
    if (e.type === 'stored') {
      const hashes = [wireHash(e.hash, format)];
      const tokens = Array.from(e.tokenIds);
      let last = e.hash;
      let j = i + 1;
      for (; j < events.length; j++) {
        const n = events[j]!;
        if (n.type !== 'stored' || n.parentHash === null || !sameBytes(n.parentHash, last)) break;
        hashes.push(wireHash(n.hash, format));
        for (const t of n.tokenIds) tokens.push(t);
        last = n.hash;
      }
      const parent = e.parentHash === null ? null : wireHash(e.parentHash, format);
      out.push(['BlockStored', hashes, parent, tokens, blockSize, null, medium]);
      i = j;
    } else if (e.type === 'removed') {
      const hashes = [wireHash(e.hash, format)];
      let j = i + 1;
      for (; j < events.length && events[j]!.type === 'removed'; j++) {
        hashes.push(wireHash((events[j] as { hash: Uint8Array }).hash, format));
      }
      out.push(['BlockRemoved', hashes, medium]);
      i = j;
    } else {
      out.push(['AllBlocksCleared']);
      i++;
    }
  }
  return out;
}

/**
 * Encodes drained events as vLLM KVEventBatch messages, one per dp rank that
 * has events (vLLM publishes per rank too), ranks in ascending order.
 */
export function encodeVllmEventBatches(events: readonly KVEvent[], options: VllmEncodeOptions = {}): EncodedBatch[] {
  checkObject('options', options);
  checkKeys('options', options, OPTION_KEYS);
  const ts = options.ts ?? Date.now() / 1000;
  if (typeof ts !== 'number' || !Number.isFinite(ts)) throw new TypeError(`options.ts must be a finite number, got ${describe(ts)}`);
  const format = options.blockHashes ?? 'uint64';
  if (format !== 'uint64' && format !== 'bytes') throw new RangeError(`options.blockHashes must be "uint64" or "bytes", got ${describe(format)}`);
  const medium = options.medium === undefined ? 'GPU' : options.medium;
  if (medium !== null && typeof medium !== 'string') throw new TypeError(`options.medium must be a string or null, got ${describe(medium)}`);
  const firstStored = events.find((e) => e.type === 'stored') as { tokenIds: Int32Array } | undefined;
  const blockSize = options.blockSize === undefined ? (firstStored?.tokenIds.length ?? 0) : checkInt('options.blockSize', options.blockSize, 1);
  const byRank = new Map<number, KVEvent[]>();
  for (const e of events) {
    let list = byRank.get(e.dpRank);
    if (!list) byRank.set(e.dpRank, (list = []));
    list.push(e);
  }
  return [...byRank.keys()]
    .sort((a, b) => a - b)
    .map((dpRank) => ({ dpRank, payload: encodeBatch(ts, toVllmEvents(byRank.get(dpRank)!, format, medium, blockSize), dpRank) }));
}

/**
 * [ts, events, data_parallel_rank]. The timestamp must go out as a msgpack
 * float64 (msgspec's `float` field) even when it is integral, which a generic
 * encoder would write as an integer: it is written by hand, the rest by the library.
 */
function encodeBatch(ts: number, events: unknown[], dpRank: number): Uint8Array {
  const body = encoder.encode(events);
  const rank = encoder.encode(dpRank);
  const out = new Uint8Array(1 + 9 + body.length + rank.length);
  out[0] = 0x93; // fixarray of 3
  out[1] = 0xcb; // float 64, big endian
  new DataView(out.buffer).setFloat64(2, ts, false);
  out.set(body, 10);
  out.set(rank, 10 + body.length);
  return out;
}
