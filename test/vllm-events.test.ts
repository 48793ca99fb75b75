// The vLLM KVEventBatch encoders: our bytes read by test/support/vllm-wire.ts
// (a reader written from vLLM's struct definitions, as strict as vLLM's own
// msgspec decoder) and checked field by field, in both forms; the integer
// hash rule; the fast encoder (straight from the core's records) against the
// one from event objects; input validation; the library's decoder against
// the test reader. ZeroMQ: test/zmq-events.test.ts.

import { decode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { drainVllmEventBatches, encodeVllmEventBatches, kvEventsTopic, type VllmEncodeOptions } from '../bindings/events/vllm.js';
import { decodeVllmEventBatch, decodeVllmEventBatches } from '../bindings/events/vllm-decode.js';
import { hashBlocks } from '../bindings/hash.js';
import type { KVCacheGroup, KVEvent } from '../bindings/managers/kv-events.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { readBatch } from './support/vllm-wire.js';

const B = 4;
const T = Array.from({ length: 3 * B + 1 }, (_, i) => 50 + i);
/** vLLM's integer form of a hash: the low 64 bits of the XXH3-128 value (our 16 bytes hold it little endian first). */
const low64 = (h: Uint8Array) => new DataView(h.buffer, h.byteOffset, 16).getBigUint64(0, true);
/** xxHash's canonical digest of our hash: the 128-bit value big endian (high half first). */
const canonical = (h: Uint8Array) => Uint8Array.from(h).reverse();
const keys = hashBlocks(T, B);
const key = (b: number) => keys.slice(b * 16, b * 16 + 16);
const FULL: KVCacheGroup = { index: 0, kind: 'full_attention', slidingWindow: null };

/** A pool run on two ranks: both store a chain (rank 1 salted); rank 1 evicts its chain, then a reset clears both. */
function run(p: BlockManagerPool): void {
  p.recordEvents(true);
  const a = new Sequence(T); // rank 0: 3 full blocks
  const b = new Sequence(T.slice(0, 2 * B), { cacheSalt: 'tenant' }); // rank 1 (more free): 2 salted blocks
  expect(p.allocate(a)).toBe(true);
  expect(p.allocate(b)).toBe(true);
  expect([a.dpRank, b.dpRank]).toEqual([0, 1]);
  a.kvCachedTokens = a.numTokens;
  b.kvCachedTokens = b.numTokens;
  p.deallocate([a, b]);
  const c = new Sequence(Array.from({ length: 4 * B }, (_, i) => 900 + i)); // rank 1 (2 free > 1): evicts 2
  expect(p.allocate(c)).toBe(true);
  expect(c.dpRank).toBe(1);
  p.deallocate(c); // nothing computed: nothing cached
  expect(p.resetPrefixCache()).toEqual([3, 0]); // both caches end empty: a clear each
}

function events(): KVEvent[] {
  const p = new BlockManagerPool({ numBlocks: 5, blockSize: B, dpSize: 2 });
  run(p);
  const ev = p.drainEvents();
  p.dispose();
  return ev;
}

describe('vLLM KVEventBatch encoding', () => {
  it('map form (the default): every field by name, as vLLM 0.26 sends it', () => {
    const ev = events();
    const salted = ev.filter((e) => e.dpRank === 1 && e.type === 'stored') as Array<Extract<KVEvent, { type: 'stored' }>>;
    const batches = encodeVllmEventBatches(ev, { ts: 1700000000 });
    expect(batches.map((b) => b.dpRank)).toEqual([0, 1]);
    // The timestamp is a float64 even when integral (msgspec `float`).
    expect(batches[0]!.payload.subarray(0, 2)).toEqual(new Uint8Array([0x93, 0xcb]));
    const [r0, r1] = batches.map((b) => readBatch(b.payload));
    expect(r0!.forms).toEqual(['map', 'map']);
    expect(r0).toMatchObject({
      ts: 1700000000,
      dataParallelRank: 0,
      events: [
        {
          type: 'BlockStored', blockHashes: [low64(key(0)), low64(key(1)), low64(key(2))], parentBlockHash: null, tokenIds: T.slice(0, 3 * B),
          blockSize: B, loraId: null, medium: 'GPU', loraName: null, extraKeys: [null, null, null], groupIdx: 0, kvCacheSpecKind: 'full_attention',
          kvCacheSpecSlidingWindow: null,
        },
        { type: 'AllBlocksCleared' },
      ],
    });
    expect(r1).toMatchObject({
      dataParallelRank: 1,
      events: [
        // The salt is block 0's extra key; the hashes are the salted chain's.
        { type: 'BlockStored', blockHashes: salted.map((e) => low64(e.hash)), parentBlockHash: null, tokenIds: T.slice(0, 2 * B), extraKeys: [['tenant'], null] },
        // Chain tails first.
        { type: 'BlockRemoved', blockHashes: [low64(salted[1]!.hash), low64(salted[0]!.hash)], medium: 'GPU', groupIdx: 0 },
        { type: 'AllBlocksCleared' },
      ],
    });
    // Map keys as vLLM names them, "type" first.
    const raw = decode(batches[0]!.payload, { useBigInt64: true }) as [number, Array<Record<string, unknown>>, number];
    expect(Object.keys(raw[1][0]!)).toEqual([
      'type', 'block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name', 'extra_keys', 'group_idx', 'kv_cache_spec_kind',
    ]);
    // uint64 hashes are msgpack uint64 (0xcf), not floats.
    expect(batches[0]!.payload.indexOf(0xcf)).toBeGreaterThan(0);
  });

  it('positional form: exactly the fields through lora_name (8 with the tag), extra_keys only for a salt', () => {
    const batches = encodeVllmEventBatches(events(), { ts: 2, format: 'positional' });
    const [r0, r1] = batches.map((b) => decode(b.payload, { useBigInt64: true }) as [number, unknown[][], number]);
    expect(r0![1]).toEqual([
      ['BlockStored', [low64(key(0)), low64(key(1)), low64(key(2))], null, T.slice(0, 3 * B), B, null, 'GPU', null],
      ['AllBlocksCleared'],
    ]);
    expect(r1![1][0]).toHaveLength(9);
    expect(r1![1][0]![8]).toEqual([['tenant'], null]);
    expect(r1![1][1]).toEqual(['BlockRemoved', expect.any(Array), 'GPU']);
    for (const b of batches) expect(readBatch(b.payload).forms.every((f) => f === 'positional')).toBe(true);
  });

  it('a child names its parent: the run after an evicted or shared prefix starts on the chain parent', () => {
    const p = new BlockManagerPool({ numBlocks: 8, blockSize: B });
    p.recordEvents(true);
    const a = new Sequence(T.slice(0, 2 * B + 1));
    expect(p.allocate(a)).toBe(true);
    a.kvCachedTokens = a.numTokens;
    p.deallocate(a); // blocks 0 and 1 cached
    const first = readBatch(encodeVllmEventBatches(p.drainEvents(), { ts: 1 })[0]!.payload).events[0];
    const b = new Sequence(T); // hits 2 blocks, computes block 2
    expect(p.allocate(b)).toBe(true);
    b.kvCachedTokens = b.numTokens;
    p.deallocate(b);
    const second = readBatch(encodeVllmEventBatches(p.drainEvents(), { ts: 1 })[0]!.payload).events[0];
    expect(first).toMatchObject({ blockHashes: [low64(key(0)), low64(key(1))], parentBlockHash: null });
    expect(second).toMatchObject({ blockHashes: [low64(key(2))], parentBlockHash: low64(key(1)), tokenIds: T.slice(2 * B, 3 * B) });
    p.dispose();
  });

  it('bytes: the 16-byte canonical digest, whose last 8 bytes big endian are the integer form', () => {
    const ev = events();
    const ints = readBatch(encodeVllmEventBatches(ev, { ts: 1 })[0]!.payload).events[0] as { blockHashes: bigint[] };
    const bytes = readBatch(encodeVllmEventBatches(ev, { ts: 1, blockHashes: 'bytes' })[0]!.payload).events[0] as { blockHashes: Uint8Array[] };
    expect(bytes.blockHashes).toEqual([canonical(key(0)), canonical(key(1)), canonical(key(2))]);
    // vLLM's rule: int.from_bytes(digest, "big") & (2**64 - 1).
    expect(bytes.blockHashes.map((d) => new DataView(d.buffer, d.byteOffset).getBigUint64(8, false))).toEqual(ints.blockHashes);
  });

  it('a group other than full attention goes in the event (positional: after extra_keys)', () => {
    const h = (n: number) => new Uint8Array(16).fill(n);
    const group: KVCacheGroup = { index: 1, kind: 'sliding_window', slidingWindow: 128 };
    const ev: KVEvent[] = [
      { type: 'stored', dpRank: 0, blockId: 1, hash: h(1), parentHash: null, tokenIds: Int32Array.of(1, 2), salt: null, medium: 'GPU', group },
      { type: 'stored', dpRank: 0, blockId: 2, hash: h(2), parentHash: h(1), tokenIds: Int32Array.of(3, 4), salt: null, medium: 'GPU', group },
      { type: 'stored', dpRank: 0, blockId: 3, hash: h(3), parentHash: h(1), tokenIds: Int32Array.of(5, 6), salt: null, medium: 'GPU', group }, // a sibling: new event
      { type: 'removed', dpRank: 0, blockId: 2, hash: h(2), medium: 'CPU', group },
    ];
    const pos = decode(encodeVllmEventBatches(ev, { ts: 1.5, blockHashes: 'bytes', format: 'positional' })[0]!.payload) as [number, unknown[][]];
    expect(pos[1]).toEqual([
      // extra_keys: one null per block, as vLLM sends it.
      ['BlockStored', [h(1), h(2)], null, [1, 2, 3, 4], 2, null, 'GPU', null, [null, null], 1, 'sliding_window', 128],
      ['BlockStored', [h(3)], h(1), [5, 6], 2, null, 'GPU', null, [null], 1, 'sliding_window', 128],
      ['BlockRemoved', [h(2)], 'CPU', 1],
    ]);
    const map = readBatch(encodeVllmEventBatches(ev, { ts: 1.5 })[0]!.payload);
    expect(map.events[0]).toMatchObject({ groupIdx: 1, kvCacheSpecKind: 'sliding_window', kvCacheSpecSlidingWindow: 128 });
  });

  it('the encoder from the core\'s records writes the same bytes as the one from event objects', () => {
    for (const options of [{}, { format: 'positional' }, { blockHashes: 'bytes' }, { format: 'positional', blockHashes: 'bytes' }] as VllmEncodeOptions[]) {
      const a = new BlockManagerPool({ numBlocks: 5, blockSize: B, dpSize: 2 });
      const b = new BlockManagerPool({ numBlocks: 5, blockSize: B, dpSize: 2 });
      run(a);
      run(b);
      const fast = drainVllmEventBatches(a, { ...options, ts: 3 });
      const slow = encodeVllmEventBatches(b.drainEvents(), { ...options, ts: 3 });
      expect(fast).toEqual(slow);
      expect(drainVllmEventBatches(a)).toEqual([]); // drained
      a.dispose();
      b.dispose();
    }
    for (const bad of [null, {}, 5]) expect(() => drainVllmEventBatches(bad as never)).toThrow(/^pool must be a BlockManagerPool, got /);
  });

  it('host-tier blocks are announced with medium "CPU", their tokens and chain parent', () => {
    const p = new HierarchyBlockManagerPool({ numBlocks: 8, blockSize: B, hostNumBlocks: 8 });
    p.recordEvents(true, { snapshots: true });
    const s = new Sequence(T);
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = s.numTokens;
    p.deallocate(s);
    for (const t of p.takeTransfers()) if (t.offload) p.completeOffload(t.offload);
    const ev = p.drainEvents() as Array<Extract<KVEvent, { type: 'stored' }>>;
    const cpu = ev.filter((e) => e.medium === 'CPU');
    expect(cpu.map((e) => [hex(e.hash), e.parentHash && hex(e.parentHash), [...e.tokenIds]])).toEqual([
      [hex(key(0)), null, T.slice(0, B)],
      [hex(key(1)), hex(key(0)), T.slice(B, 2 * B)],
      [hex(key(2)), hex(key(1)), T.slice(2 * B, 3 * B)],
    ]);
    const [batch] = encodeVllmEventBatches(ev, { ts: 1 });
    const read = readBatch(batch!.payload).events.filter((e) => e.type === 'BlockStored') as Array<{ medium: string; blockHashes: bigint[] }>;
    expect(read.map((e) => e.medium)).toEqual(['GPU', 'CPU']);
    expect(p.snapshotEvents().filter((e) => (e as { medium: string }).medium === 'CPU')).toHaveLength(3);
    p.dispose();
  });

  it('the library decoder reads both forms as the test reader does', () => {
    for (const format of ['map', 'positional'] as const) {
      for (const b of encodeVllmEventBatches(events(), { ts: 7, format })) {
        const mine = decodeVllmEventBatch(b.payload);
        const theirs = readBatch(b.payload);
        expect(mine).toEqual({ ts: theirs.ts, events: theirs.events, dataParallelRank: theirs.dataParallelRank });
      }
    }
    expect(() => decodeVllmEventBatch(new Uint8Array([0x91, 0x01]))).toThrow(/not a vLLM KV event batch/);
    expect(() => decodeVllmEventBatch(new Uint8Array(0))).toThrow(new TypeError('kvpool: not a vLLM KV event batch: the payload is empty'));
    expect(decodeVllmEventBatches(new Uint8Array(0))).toEqual([]);
    expect(() => decodeVllmEventBatch(new Uint8Array([0x93, 0x01, 0x91, 0x81, 0xa4, 0x74, 0x79, 0x70, 0x65, 0xa1, 0x58, 0x00]))).toThrow(/unknown tag/);
  });
});

const hex = (h: Uint8Array) => Buffer.from(h).toString('hex');

describe('validation', () => {
  const good = (): Extract<KVEvent, { type: 'stored' }> => ({
    type: 'stored', dpRank: 0, blockId: 1, hash: new Uint8Array(16), parentHash: null, tokenIds: Int32Array.of(1), salt: null, medium: 'GPU', group: FULL,
  });
  it('refuses malformed events before encoding anything', () => {
    const bad = (patch: Record<string, unknown>) => encodeVllmEventBatches([good(), { ...good(), ...patch } as unknown as KVEvent], { ts: 1 });
    // A typo must not become AllBlocksCleared (which makes a router drop the instance's index).
    expect(() => encodeVllmEventBatches([{ type: 'foo', dpRank: 0 } as never])).toThrow(/events\[0\]\.type must be "stored", "removed" or "cleared", got "foo"/);
    expect(() => bad({ dpRank: -1 })).toThrow(/events\[1\]\.dpRank must be >= 0, got -1/);
    expect(() => bad({ tokenIds: [1.5] })).toThrow(/events\[1\]\.tokenIds\[0\] must be an int32 token id, got 1\.5/);
    expect(() => bad({ tokenIds: ['x'] })).toThrow(/tokenIds\[0\] must be an int32 token id, got "x"/);
    expect(() => bad({ tokenIds: [2 ** 40] })).toThrow(/tokenIds\[0\] must be an int32 token id, got 1099511627776/);
    expect(() => bad({ tokenIds: [] })).toThrow(/tokenIds must not be empty/);
    expect(() => bad({ hash: null })).toThrow(/events\[1\]\.hash must be a 16-byte Uint8Array, got null/);
    expect(() => bad({ hash: new Uint8Array(8) })).toThrow(/events\[1\]\.hash must be a 16-byte Uint8Array/);
    expect(() => bad({ parentHash: new Uint8Array(3) })).toThrow(/events\[1\]\.parentHash must be a 16-byte Uint8Array/);
    expect(() => bad({ medium: undefined })).toThrow(/events\[1\]\.medium must be a non-empty string/);
    expect(() => bad({ group: { index: 0, kind: 'mamba', slidingWindow: null } })).toThrow(/group\.kind must be/);
    expect(() => bad({ salt: 'x', parentHash: new Uint8Array(16) })).toThrow(/salt is only for a sequence's first block/);
    expect(() => encodeVllmEventBatches('x' as never)).toThrow(/events must be an array/);
    // Plain arrays of tokens are fine.
    expect(readBatch(encodeVllmEventBatches([{ ...good(), tokenIds: [1, 2] as never }], { ts: 1 })[0]!.payload).events[0]).toMatchObject({ tokenIds: [1, 2] });
    // blockId is not on the wire: an event built by hand may leave it out, and encodes as with it.
    const { blockId: _id, ...noId } = good();
    expect(encodeVllmEventBatches([noId as never], { ts: 1 })).toEqual(encodeVllmEventBatches([good()], { ts: 1 }));
    expect(() => bad({ blockId: -1 })).toThrow(/events\[1\]\.blockId must be >= 0, got -1/);
  });

  it('checks its options and the topic parts', () => {
    expect(kvEventsTopic('pod-1', 'meta-llama/Llama-3.1-8B')).toBe('kv@pod-1@meta-llama/Llama-3.1-8B');
    expect(kvEventsTopic('pod-1', 'llama', 2)).toBe('kv@pod-1-dp2@llama');
    expect(() => kvEventsTopic('pod@1', 'm')).toThrow(/instance must not contain "@"/);
    expect(() => kvEventsTopic('pod', 'a@b')).toThrow(/model must not contain "@"/);
    expect(() => kvEventsTopic('', 'm')).toThrow(/instance must not be empty/);
    expect(() => kvEventsTopic(1 as never, 'x')).toThrow(/instance must be a string, got 1/);
    expect(() => kvEventsTopic('p', 'm', -1)).toThrow(/dpRank must be >= 0/);
    expect(() => encodeVllmEventBatches([], { blockHashes: 'hex' as never })).toThrow(/options.blockHashes must be "uint64" or "bytes", got "hex"/);
    expect(() => encodeVllmEventBatches([], { format: 'json' as never })).toThrow(/options.format must be "map" or "positional", got "json"/);
    expect(() => encodeVllmEventBatches([], { ts: NaN })).toThrow(/options.ts must be a finite number/);
    expect(() => encodeVllmEventBatches([], { medium: 'GPU' } as never)).toThrow(/unknown option "medium"/);
    expect(encodeVllmEventBatches([])).toEqual([]);
  });
});
