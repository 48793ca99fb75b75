// Batches a buggy engine or a hostile peer sends a router: each of the
// refusals docs/events.md lists (as payload bytes or as objects), and
// block hashes crafted to share one home position in a table placed by a
// fixed hash (the mix the index used before its tables were keyed).

import { encode } from '@msgpack/msgpack';
import type { KVEventIndex } from '../../bindings/events/kv-event-index.js';

/** A BlockStored of `n` blocks of `B` tokens as vLLM's map form names its fields. */
export function storedMap(hashes: Array<bigint | number | Uint8Array>, B: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'BlockStored',
    block_hashes: hashes,
    parent_block_hash: null,
    token_ids: Array.from({ length: hashes.length * B }, (_, i) => 100 + i),
    block_size: B,
    lora_id: null,
    medium: 'GPU',
    lora_name: null,
    ...over,
  };
}

export const payload = (events: unknown[], rank: unknown = 0, ts: unknown = 1): Uint8Array => encode([ts, events, rank], { useBigInt64: true });

/** A payload whose `extra_keys` of block 0 is `depth` arrays nested in one another (bytes by hand: encoders refuse such depths). */
export function deepExtraKeys(B: number, depth: number): Uint8Array {
  const marker = 'EXTRA-KEYS-MARKER';
  const bytes = payload([storedMap([1n], B, { extra_keys: [marker] })]);
  const m = encode(marker);
  const at = Buffer.from(bytes).indexOf(Buffer.from(m));
  const nested = new Uint8Array(depth + 1).fill(0x91);
  nested[depth] = 0xc0;
  const out = new Uint8Array(bytes.length - m.length + nested.length);
  out.set(bytes.subarray(0, at));
  out.set(nested, at);
  out.set(bytes.subarray(at + m.length), at + nested.length);
  return out;
}

/** Each case: what it is, the batch (bytes or object), and the field its refusal must name. */
export interface HostileCase {
  what: string;
  batch: Uint8Array | Record<string, unknown>;
  names: RegExp;
  error: typeof TypeError | typeof RangeError;
}

/** The refusals the issue reported, for an index of block size `B`. */
export function refusedCases(B: number): HostileCase[] {
  const good = storedMap([11n, 12n], B);
  const obj = (events: unknown[], rank: unknown = 0): Record<string, unknown> => ({ ts: 1, events, dataParallelRank: rank });
  const objStored = (over: Record<string, unknown>) => ({ type: 'BlockStored', blockHashes: [21n], parentBlockHash: null, tokenIds: Array.from({ length: B }, (_, i) => i), blockSize: B, ...over });
  return [
    { what: 'block_size 0', batch: payload([good, storedMap([13n], B, { block_size: 0, token_ids: [] })]), names: /events\[1\]\.block_size/, error: RangeError },
    { what: 'a token past int32', batch: payload([storedMap([14n], B, { token_ids: [4294967301, ...Array(B - 1).fill(1)] })]), names: /events\[0\]\.token_ids\[0\] must be an int32 token id, got 4294967301/, error: RangeError },
    { what: 'a token below int32', batch: payload([good, storedMap([15n], B, { token_ids: [...Array(B - 1).fill(1), -4294967291] })]), names: new RegExp(`events\\[1\\]\\.token_ids\\[${B - 1}\\] must be an int32 token id, got -4294967291`), error: RangeError },
    { what: 'data_parallel_rank -3', batch: payload([good], -3), names: /data_parallel_rank must be an integer in \[0, /, error: RangeError },
    { what: 'a BlockStored with no fields', batch: payload([good, { type: 'BlockStored' }]), names: /events\[1\]\.(token_ids|block_hashes) must be an array/, error: TypeError },
    { what: 'a type typo', batch: payload([good, { type: 'BlockRemovd', block_hashes: [11n] }]), names: /events\[1\]/, error: TypeError },
    { what: 'events: null', batch: obj(null as never), names: /events must be an array of events, got null/, error: TypeError },
    { what: 'blockHashes: 5', batch: obj([objStored({ blockHashes: 5 })]), names: /events\[0\]\.blockHashes must be an array of block hashes, got 5/, error: TypeError },
    { what: 'a map in extra keys', batch: obj([objStored({ extraKeys: [[{ big: 5n }]] })]), names: /events\[0\]\.extraKeys\[0\]\[0\] must be a string, number/, error: TypeError },
    { what: 'a BigInt past uint64 in extra keys', batch: obj([objStored({ extraKeys: [[1n << 70n]] })]), names: /events\[0\]\.extraKeys\[0\]\[0\] must be an int64 or uint64/, error: RangeError },
    { what: 'extra keys nested 100,000 deep', batch: deepExtraKeys(B, 100_000), names: /events\[0\]\.extra_keys\[0\](\[0\])* must be nested at most/, error: RangeError },
    { what: 'a rank typed as a string', batch: obj([objStored({})], 'zero'), names: /dataParallelRank must be an integer/, error: TypeError },
    { what: 'a hash of 200 bytes', batch: payload([storedMap([new Uint8Array(200)], B)]), names: /events\[0\]\.block_hashes\[0\] must be 1 to 64 bytes/, error: RangeError },
    { what: 'tokens that are not the blocks', batch: payload([storedMap([16n, 17n], B, { token_ids: [1] })]), names: /events\[0\]\.token_ids must be 2 blocks of/, error: RangeError },
    { what: 'a float hash', batch: obj([objStored({ blockHashes: [2 ** 60] })]), names: /events\[0\]\.blockHashes\[0\] must be an integer/, error: TypeError },
    { what: 'an unknown field', batch: obj([{ type: 'BlockRemoved', blockHashes: [1n], hashes: [2n] }]), names: /events\[0\] \(BlockRemoved\) has an unknown field "hashes"/, error: TypeError },
    { what: 'a timestamp that is not a number', batch: obj([objStored({})]), names: /ts must be a finite number/, error: TypeError },
  ].map((c) => (c.what === 'a timestamp that is not a number' ? { ...c, batch: { ...(c.batch as object), ts: 'now' } } : c));
}

/** The table hash the index used before its tables were keyed (index-slots.ts before seeding): fixed, so a stream could aim at it. */
export function unkeyedMix(a: number, b: number, c: number): number {
  let h = Math.imul(a ^ Math.imul(b, 0x85ebca6b), 0x9e3779b1) ^ Math.imul(c + 0x7f4a7c15, 0xc2b2ae35);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return h ^ (h >>> 12);
}

/**
 * `n` distinct uint64 block hashes that all had the same unkeyed table hash
 * for any source: lo ^ imul(hi, K) is one constant, so the mix's first step
 * (and all that follows) is the same for every one of them.
 */
export function collidingHashes(n: number): bigint[] {
  const out: bigint[] = [];
  for (let i = 1; i <= n; i++) {
    const hi = i >>> 0;
    const lo = (0x1234_5678 ^ Math.imul(hi, 0x85ebca6b)) >>> 0;
    out.push((BigInt(hi) << 32n) | BigInt(lo));
  }
  return out;
}

/** Everything an index holds, as plain data: equal before and after a refused batch. */
export function fingerprint(idx: KVEventIndex): string {
  const { longestProbe: _, ...counts } = idx.stats();
  const info = idx.sourcesInfo();
  const blocks = info.map((s) => idx.blocks(s.instance, s.dpRank, s.medium).map((b) => [String(b.hash), String(b.parentHash), [...b.tokenIds], b.keyed, JSON.stringify(b.extraKeys, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))]));
  return JSON.stringify({ counts, info, blocks });
}

