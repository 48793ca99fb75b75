// The vLLM KVEventBatch encoder: our bytes decoded with a msgpack decoder and
// checked field by field against vLLM's array layout; and the ZeroMQ
// publisher's frames received by a subscriber on loopback.

import { decode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { encodeVllmEventBatches, kvEventsTopic } from '../bindings/events/vllm.js';
import { hashBlocks } from '../bindings/hash.js';
import type { KVEvent } from '../bindings/managers/kv-events.js';
import { ZmqEventPublisher } from '../bindings/node/zmq-publisher.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { external } from './support/externals.js';

const B = 4;
const T = Array.from({ length: 3 * B + 1 }, (_, i) => 50 + i);
const low64 = (h: Uint8Array) => new DataView(h.buffer, h.byteOffset, 16).getBigUint64(0, true);
const keys = hashBlocks(T, B);
const key = (b: number) => keys.slice(b * 16, b * 16 + 16);

/** A pool run on two ranks: both store a chain; rank 1 evicts its chain, then a reset clears both. */
function events(): KVEvent[] {
  const p = new BlockManagerPool({ numBlocks: 5, blockSize: B, dpSize: 2 });
  p.recordEvents(true);
  const a = new Sequence(T); // rank 0: 3 full blocks
  const b = new Sequence(T.slice(0, 2 * B)); // rank 1 (more free): 2 blocks, the first two keys
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
  const ev = p.drainEvents();
  p.dispose();
  return ev;
}

describe('vLLM KVEventBatch encoding', () => {
  it('decodes to vLLM arrays with every field in order', () => {
    const batches = encodeVllmEventBatches(events(), { ts: 1700000000 });
    expect(batches.map((b) => b.dpRank)).toEqual([0, 1]);
    const [r0, r1] = batches.map((b) => decode(b.payload, { useBigInt64: true }));
    // The timestamp is a float64 even when integral (msgspec `float`).
    expect(batches[0]!.payload.subarray(0, 2)).toEqual(new Uint8Array([0x93, 0xcb]));
    expect(r0).toEqual([
      1700000000,
      [
        // [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
        ['BlockStored', [low64(key(0)), low64(key(1)), low64(key(2))], null, T.slice(0, 3 * B), B, null, 'GPU'],
        ['AllBlocksCleared'],
      ],
      0, // data_parallel_rank
    ]);
    expect(r1).toEqual([
      1700000000,
      [
        ['BlockStored', [low64(key(0)), low64(key(1))], null, T.slice(0, 2 * B), B, null, 'GPU'],
        // [tag, block_hashes, medium]: chain tails first
        ['BlockRemoved', [low64(key(1)), low64(key(0))], 'GPU'],
        ['AllBlocksCleared'],
      ],
      1,
    ]);
    // uint64 hashes are msgpack uint64 (0xcf), not floats.
    const bytes = batches[0]!.payload;
    expect(bytes.indexOf(0xcf)).toBeGreaterThan(0);
  });

  it('writes 16-byte hashes and parents with blockHashes: "bytes", splitting chains where they break', () => {
    const h = (n: number) => new Uint8Array(16).fill(n);
    const ev: KVEvent[] = [
      { type: 'stored', dpRank: 0, blockId: 1, hash: h(1), parentHash: null, tokenIds: Int32Array.of(1, 2) },
      { type: 'stored', dpRank: 0, blockId: 2, hash: h(2), parentHash: h(1), tokenIds: Int32Array.of(3, 4) },
      { type: 'stored', dpRank: 0, blockId: 3, hash: h(3), parentHash: h(1), tokenIds: Int32Array.of(5, 6) }, // a sibling: new event
      { type: 'removed', dpRank: 0, blockId: 2, hash: h(2) },
    ];
    const [b] = encodeVllmEventBatches(ev, { ts: 1.5, blockHashes: 'bytes', medium: null });
    expect(decode(b!.payload)).toEqual([
      1.5,
      [
        ['BlockStored', [h(1), h(2)], null, [1, 2, 3, 4], 2, null, null],
        ['BlockStored', [h(3)], h(1), [5, 6], 2, null, null],
        ['BlockRemoved', [h(2)], null],
      ],
      0,
    ]);
  });

  it('checks its options and builds the topic', () => {
    expect(kvEventsTopic('pod-1', 'llama')).toBe('kv@pod-1@llama');
    expect(() => kvEventsTopic(1 as never, 'x')).toThrow(/instance must be a string, got 1/);
    expect(() => encodeVllmEventBatches([], { blockHashes: 'hex' as never })).toThrow(/options.blockHashes must be "uint64" or "bytes", got "hex"/);
    expect(() => encodeVllmEventBatches([], { ts: NaN })).toThrow(/options.ts must be a finite number/);
    expect(() => encodeVllmEventBatches([], { tz: 1 } as never)).toThrow(/unknown option "tz"/);
    expect(encodeVllmEventBatches([])).toEqual([]);
  });
});

describe('ZeroMQ publisher', () => {
  it('publishes topic, sequence number and payload frames a subscriber receives in order', async (ctx) => {
    interface Subscriber {
      receiveTimeout: number;
      connect(endpoint: string): void;
      subscribe(topic: string): void;
      receive(): Promise<Buffer[]>;
      close(): void;
    }
    let zmq: { Subscriber: new (options: { receiveTimeout: number }) => Subscriber };
    try {
      const name = 'zeromq'; // not resolved at compile time: the dependency is optional
      zmq = await import(name);
    } catch (e) {
      // A clone whose install skipped the optional dependency skips this test
      // with a warning; CI (KVPOOL_REQUIRE_EXTERNALS=1) installs it and fails here.
      external('the optional dependency zeromq', false, `it cannot be loaded (${(e as Error).message})`);
      ctx.skip();
      return;
    }
    const topic = kvEventsTopic('test', 'model');
    const pub = await ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*', topic });
    const sub = new zmq.Subscriber({ receiveTimeout: 50 });
    const seqOf = (f: Buffer) => new DataView(f.buffer, f.byteOffset, 8).getBigUint64(0, false);
    try {
      expect(pub.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
      sub.connect(pub.endpoint);
      sub.subscribe(topic);
      // PUB drops messages until the subscription has reached it: publish a
      // probe until one arrives. Probes sent after it may still be on their
      // way; they are skipped by sequence number below.
      const probe = new Uint8Array([0xc0]);
      let lastProbe = -1n;
      for (let got = false; !got; ) {
        lastProbe = await pub.publish(probe);
        got = await sub.receive().then(
          () => true,
          (e: { code?: string }) => {
            if (e.code !== 'EAGAIN') throw e;
            return false;
          },
        );
      }
      const payloads = encodeVllmEventBatches(events(), { ts: 2 }).map((b) => b.payload);
      // Not awaited one by one: the publisher keeps call order.
      const half = Math.ceil(payloads.length / 2);
      const sends = payloads.slice(0, half).map((p) => pub.publish(p));
      sends.push(pub.publishEvents(events(), { ts: 2 }).then(() => -1n));
      await Promise.all(sends);
      await expect(pub.publish('x' as never)).rejects.toThrow(/payload must be a Uint8Array/);
      sub.receiveTimeout = -1;
      const expected = [...payloads.slice(0, half), ...payloads];
      const seen: Array<[bigint, number[]]> = [];
      while (seen.length < expected.length) {
        const [t, s, body] = await sub.receive();
        expect(t!.toString()).toBe(topic);
        if (seqOf(s!) <= lastProbe) continue;
        seen.push([seqOf(s!), [...body!]]);
      }
      expect(seen.map(([q]) => q)).toEqual(expected.map((_, i) => lastProbe + 1n + BigInt(i)));
      expect(seen.map(([, b]) => b)).toEqual(expected.map((p) => [...p]));
      expect((decode(new Uint8Array(seen.at(-1)![1]), { useBigInt64: true }) as unknown[])[2]).toBe(1); // rank 1's batch last
      pub.close();
      await expect(pub.publish(probe)).rejects.toThrow(/publisher is closed/);
    } finally {
      sub.close();
      pub.close();
    }
  });
});
