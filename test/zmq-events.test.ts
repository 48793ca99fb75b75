// The ZeroMQ publisher as routers use vLLM's: frames a subscriber receives in
// order, the replay endpoint in both reply framings (a late router reaches
// the engine's exact cache through it), one publisher per dp rank on vLLM's
// port-per-rank endpoints or on one endpoint with a topic per rank, and
// `kvpool replay --zmq` publishing a replay a router follows to its final
// cache. Needs the zeromq package (a dev dependency; required under CI).

import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { drainVllmEventBatches, encodeVllmEventBatches, kvEventsTopic } from '../bindings/events/vllm.js';
import { rankEndpoint, ZmqEventPublisher } from '../bindings/node/zmq-publisher.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { replaySync } from '../bindings/replay/replay.js';
import { replayVllmSync } from '../bindings/vllm/replay.js';
import { captureUntil } from './support/capture.js';
import { external } from './support/externals.js';
import { readBatch } from './support/vllm-wire.js';

interface Sock {
  receiveTimeout: number;
  connect(endpoint: string): void;
  bind(endpoint: string): Promise<void>;
  subscribe(topic: string): void;
  send(frames: (Uint8Array | string)[]): Promise<void>;
  receive(): Promise<Buffer[]>;
  close(): void;
  readonly lastEndpoint: string | null;
}
interface Zmq {
  Subscriber: new (options?: { receiveTimeout?: number }) => Sock;
  Dealer: new (options?: { receiveTimeout?: number }) => Sock;
}

let zmq: Zmq | null = null;
try {
  const name = 'zeromq'; // not resolved at compile time: the dependency is optional
  zmq = (await import(name)) as Zmq;
} catch (e) {
  external('the zeromq package', false, `it cannot be loaded (${(e as Error).message}); npm install zeromq`);
}

const strip = ({ seconds: _s, allocateCallsPerSecond: _a, ...rest }: ReturnType<typeof replaySync>) => rest;
const seqOf = (f: Uint8Array) => new DataView(f.buffer, f.byteOffset, 8).getBigInt64(0, false);
const B = 2;

/** A free TCP port on loopback. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Subscribes `sub` and waits until a probe published on `pub` arrives (PUB drops messages until then); returns the last probe's sequence number. */
async function handshake(pub: ZmqEventPublisher, sub: Sock): Promise<bigint> {
  const probe = new Uint8Array([0xc0]);
  sub.receiveTimeout = 50;
  let last = -1n;
  for (let got = false; !got; ) {
    last = await pub.publish(probe);
    got = await sub.receive().then(
      () => true,
      (e: { code?: string }) => {
        if (e.code !== 'EAGAIN') throw e;
        return false;
      },
    );
  }
  sub.receiveTimeout = 5000;
  return last;
}

/** Sends a replay request and collects the replies until the end marker. */
async function replay(dealer: Sock, from: bigint, frames: 'topic' | 'seq', readAfterMs = 0): Promise<Array<[bigint, Uint8Array, string]>> {
  const start = new Uint8Array(8);
  new DataView(start.buffer).setBigUint64(0, from, false);
  await dealer.send([new Uint8Array(0), start]); // a DEALER adds the delimiter a REQ would
  if (readAfterMs > 0) await new Promise((r) => setTimeout(r, readAfterMs));
  const out: Array<[bigint, Uint8Array, string]> = [];
  for (;;) {
    const msg = await dealer.receive();
    expect(msg[0]!.length).toBe(0); // the delimiter
    const [topic, seq, payload] = frames === 'topic' ? [msg[1]!, msg[2]!, msg[3]!] : [null, msg[1]!, msg[2]!];
    expect(msg).toHaveLength(frames === 'topic' ? 4 : 3);
    if (seqOf(seq) === -1n) {
      expect(payload.length).toBe(0);
      if (topic !== null) expect(topic.length).toBe(0);
      return out;
    }
    out.push([seqOf(seq), new Uint8Array(payload), topic?.toString() ?? '']);
  }
}

/** A pool run whose events are published batch by batch: several requests sharing prefixes, evictions, a reset. */
function steps(): Array<(p: BlockManagerPool) => void> {
  const cache = (tokens: number[]) => (p: BlockManagerPool) => {
    const s = new Sequence(tokens);
    if (!p.allocate(s)) return;
    s.kvCachedTokens = s.numTokens;
    p.deallocate(s);
  };
  const out: Array<(p: BlockManagerPool) => void> = [];
  for (let i = 0; i < 12; i++) out.push(cache(Array.from({ length: 2 + (i % 5) * 2 }, (_, k) => (k < 4 ? k : 100 * i + k))));
  out.push((p) => void p.resetPrefixCache());
  for (let i = 0; i < 6; i++) out.push(cache(Array.from({ length: 6 }, (_, k) => (k < 2 ? k : 50 * i + k))));
  return out;
}

describe.skipIf(zmq === null)('ZeroMQ publisher', () => {
  it('publishes topic, sequence number and payload frames a subscriber receives in order', async () => {
    const topic = kvEventsTopic('test', 'model');
    const pub = await ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*', topic, mode: 'bind' });
    const sub = new zmq!.Subscriber();
    try {
      expect(pub.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
      sub.connect(pub.endpoint);
      sub.subscribe(topic);
      const lastProbe = await handshake(pub, sub);
      const p = new BlockManagerPool({ numBlocks: 8, blockSize: B, dpSize: 2 });
      p.recordEvents(true);
      const payloads: Uint8Array[] = [];
      for (const step of steps()) {
        step(p);
        for (const b of drainVllmEventBatches(p, { ts: 1 })) payloads.push(b.payload);
      }
      p.dispose();
      // Not awaited one by one: the publisher keeps call order.
      await Promise.all(payloads.map((x) => pub.publish(x)));
      await expect(pub.publish('x' as never)).rejects.toThrow(/payload must be a Uint8Array/);
      const seen: Array<[bigint, Uint8Array]> = [];
      while (seen.length < payloads.length) {
        const [t, s, body] = await sub.receive();
        expect(t!.toString()).toBe(topic);
        if (seqOf(s!) <= lastProbe) continue;
        seen.push([seqOf(s!), new Uint8Array(body!)]);
      }
      expect(seen.map(([q]) => q)).toEqual(payloads.map((_, i) => lastProbe + 1n + BigInt(i)));
      expect(seen.map(([, b]) => b)).toEqual(payloads);
      expect(new Set(seen.map(([, b]) => readBatch(b).dataParallelRank))).toEqual(new Set([0, 1]));
      pub.close();
      await expect(pub.publish(new Uint8Array(1))).rejects.toThrow(/publisher is closed/);
    } finally {
      sub.close();
      pub.close();
    }
  });

  for (const frames of ['topic', 'seq'] as const) {
    it(`replays its last batches on the ROUTER endpoint (${frames} framing), and a late router reaches the exact cache`, async () => {
      const topic = kvEventsTopic('engine', 'model');
      const pub = await ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic, replayFrames: frames, bufferSteps: 100 });
      const dealer = new zmq!.Dealer({ receiveTimeout: 5000 });
      const pool = new BlockManagerPool({ numBlocks: 8, blockSize: B });
      pool.recordEvents(true);
      try {
        dealer.connect(pub.replayEndpoint!);
        const sent: Uint8Array[] = [];
        for (const step of steps()) {
          step(pool);
          for (const b of drainVllmEventBatches(pool, { ts: 1 })) {
            sent.push(b.payload);
            await pub.publish(b.payload);
          }
        }
        // A malformed request is ignored; the next one is answered.
        await dealer.send([new Uint8Array(0), new Uint8Array(3)]);
        const all = await replay(dealer, 0n, frames);
        expect(all.map(([s]) => s)).toEqual(sent.map((_, i) => BigInt(i)));
        expect(all.map(([, b]) => b)).toEqual(sent);
        if (frames === 'topic') expect(all.every(([, , t]) => t === topic)).toBe(true);
        expect((await replay(dealer, 5n, frames)).map(([s]) => s)[0]).toBe(5n);
        expect(await replay(dealer, 10_000n, frames)).toEqual([]);
        // The late router: replay from 0, then nothing more happened: the index is the cache.
        const idx = new KVEventIndex();
        for (const [, b] of all) idx.applyBatch('engine', readBatch(b));
        const m = pool.managers[0]!;
        const low64 = (h: Uint8Array) => new DataView(h.buffer, h.byteOffset, 16).getBigUint64(0, true);
        expect(new Set(idx.blocks('engine').map((b) => b.hash))).toEqual(new Set([...m.lruOrder()].map((id) => low64(m.blockHash(id)!))));
      } finally {
        pool.dispose();
        dealer.close();
        pub.close();
      }
    });
  }

  it('keeps only its last bufferSteps batches', async () => {
    const pub = await ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', bufferSteps: 3 });
    const dealer = new zmq!.Dealer({ receiveTimeout: 5000 });
    try {
      dealer.connect(pub.replayEndpoint!);
      for (let i = 0; i < 7; i++) await pub.publish(Uint8Array.of(i));
      expect((await replay(dealer, 0n, 'topic')).map(([s, b]) => [s, b[0]])).toEqual([[4n, 4], [5n, 5], [6n, 6]]);
    } finally {
      dealer.close();
      pub.close();
    }
  });

  it('replays 12,000 batches whole and in order, past the socket\'s high-water mark, then the end marker', async () => {
    // A ROUTER drops at its high-water mark (1,000) unless mandatory: 9,150 of 10,000 arrived before.
    const pub = await ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', bufferSteps: 12_000 });
    const dealer = new zmq!.Dealer({ receiveTimeout: 10_000 });
    try {
      dealer.connect(pub.replayEndpoint!);
      // 1 KB each: 12 MB, more than the kernel's socket buffers and both sockets' queues hold.
      const body = (i: number) => new Uint8Array(1024).fill(7).fill(i & 255, 0, 1).fill(i >> 8, 1, 2);
      await Promise.all(Array.from({ length: 12_000 }, (_, i) => pub.publish(body(i))));
      // A subscriber that starts reading late: the publisher meets the high-water mark while it sends.
      const got = await replay(dealer, 0n, 'topic', 500);
      expect(got.length).toBe(12_000);
      expect(got.every(([s, b], i) => s === BigInt(i) && b[0] === (i & 255) && b[1] === i >> 8)).toBe(true);
      expect(pub.replayStats).toEqual({ served: 1, partial: 0, ignored: 0, abandoned: 0 });
    } finally {
      dealer.close();
      pub.close();
    }
  });

  it('a replay from before its buffer starts is visibly partial: its first batch is past the sequence asked for', async () => {
    const pub = await ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', bufferSteps: 4 });
    const dealer = new zmq!.Dealer({ receiveTimeout: 5000 });
    try {
      dealer.connect(pub.replayEndpoint!);
      for (let i = 0; i < 10; i++) await pub.publish(Uint8Array.of(i));
      // The subscriber's check (docs/events.md): complete iff the first sequence number is the one it asked for.
      const from2 = await replay(dealer, 2n, 'topic');
      expect(from2.map(([q]) => q)).toEqual([6n, 7n, 8n, 9n]);
      expect(from2[0]![0] > 2n).toBe(true); // 2 to 5 are lost: re-snapshot
      const from7 = await replay(dealer, 7n, 'topic');
      expect(from7.map(([q]) => q)).toEqual([7n, 8n, 9n]); // complete
      expect(await replay(dealer, 10n, 'topic')).toEqual([]); // nothing new: complete too
      expect(pub.replayStats).toEqual({ served: 3, partial: 1, ignored: 0, abandoned: 0 });
    } finally {
      dealer.close();
      pub.close();
    }
  });

  it('bounds what one request costs: an oversized one is dropped by libzmq before it is buffered, malformed ones are ignored, others are served', async () => {
    const pub = await ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', bufferSteps: 10 });
    const hostile = new zmq!.Dealer({ receiveTimeout: 300 });
    const good = new zmq!.Dealer({ receiveTimeout: 5000 });
    try {
      hostile.connect(pub.replayEndpoint!);
      good.connect(pub.replayEndpoint!);
      for (let i = 0; i < 3; i++) await pub.publish(Uint8Array.of(i));
      // 4 MiB where 8 bytes belong: libzmq refuses the frame (past maxMessageSize) and drops the connection,
      // so the serve loop never sees it (it would count it as ignored).
      await hostile.send([new Uint8Array(0), new Uint8Array(4 << 20)]);
      await expect(hostile.receive()).rejects.toMatchObject({ code: 'EAGAIN' });
      expect((await replay(good, 0n, 'topic')).map(([q]) => q)).toEqual([0n, 1n, 2n]);
      expect(pub.replayStats.ignored).toBe(0);
      // Small but malformed: seen, ignored, counted; the next request is answered.
      await good.send([new Uint8Array(0), new Uint8Array(3)]);
      await good.send([new Uint8Array(0), new Uint8Array(8), new Uint8Array(8)]);
      expect((await replay(good, 1n, 'topic')).map(([q]) => q)).toEqual([1n, 2n]);
      expect(pub.replayStats).toMatchObject({ served: 2, ignored: 2 });
      await expect(ZmqEventPublisher.create({ replayEndpoint: 'tcp://127.0.0.1:*', replayMaxRequestBytes: 4 })).rejects.toThrow(/options.replayMaxRequestBytes must be in \[8, 1048576\], got 4/);
      await expect(ZmqEventPublisher.create({ replayQueue: 0 })).rejects.toThrow(/options.replayQueue/);
    } finally {
      hostile.close();
      good.close();
      pub.close();
    }
  });

  it('one publisher per rank: vLLM\'s port per rank, or one endpoint with a topic per rank', async () => {
    const base = await freePort();
    const pubs = await ZmqEventPublisher.forRanks(2, { endpoint: `tcp://127.0.0.1:${base}`, mode: 'bind', topic: 'kv@e@m' });
    try {
      expect(pubs.map((p) => [p.endpoint, p.topic])).toEqual([[`tcp://127.0.0.1:${base}`, 'kv@e@m'], [`tcp://127.0.0.1:${base + 1}`, 'kv@e@m']]);
    } finally {
      for (const p of pubs) p.close();
    }
    // A router binds; every rank connects to it with its own topic (llm-d's central indexer).
    const sub = new zmq!.Subscriber();
    await sub.bind('tcp://127.0.0.1:*');
    const byTopic = await ZmqEventPublisher.forRanks(2, { endpoint: sub.lastEndpoint!, ranks: 'topic', instance: 'pod', model: 'm' });
    try {
      expect(byTopic.map((p) => p.topic)).toEqual(['kv@pod-dp0@m', 'kv@pod-dp1@m']);
      sub.subscribe('kv@');
      await handshake(byTopic[1]!, sub);
      const [b0] = encodeVllmEventBatches([{ type: 'cleared', dpRank: 0, medium: 'GPU' }], { ts: 1 });
      await byTopic[0]!.publish(b0!.payload);
      for (;;) {
        const [t, , body] = await sub.receive();
        if (t!.toString() === 'kv@pod-dp0@m') {
          expect(readBatch(new Uint8Array(body!)).events).toEqual([{ type: 'AllBlocksCleared' }]);
          break;
        }
      }
    } finally {
      for (const p of byTopic) p.close();
      sub.close();
    }
    await expect(ZmqEventPublisher.forRanks(2, { endpoint: 'tcp://*:5557', ranks: 'topic', instance: 'p', model: 'm' })).rejects.toThrow(/the ranks connect to it/);
    await expect(ZmqEventPublisher.forRanks(1, { ranks: 'topic', instance: 'p@1', model: 'm' })).rejects.toThrow(/instance must not contain "@"/);
    await expect(ZmqEventPublisher.forRanks(1, { ranks: 'topic', topic: 'x', instance: 'p', model: 'm' } as never)).rejects.toThrow(/options.topic: with ranks "topic"/);
    await expect(ZmqEventPublisher.create({ replayFrames: 'both' as never })).rejects.toThrow(/options.replayFrames must be "topic" or "seq", got "both"/);
    await expect(ZmqEventPublisher.create({ bufferSteps: 0 })).rejects.toThrow(/options.bufferSteps must be an integer >= 1/);
  });

  it('kvpool replay --zmq publishes every step; a router that replays from 0 reaches the final cache', async () => {
    const [port, replayPort] = [await freePort(), await freePort()];
    const args = ['replay', '--json', '--no-progress', '--requests', '60', '--num-blocks', '300', '--max-running', '4'];
    // Resolves `over` when the command says it is done and holds its sockets open.
    const { run, seen: over, restore } = captureUntil('replay done', () =>
      main([...args, '--zmq', `tcp://127.0.0.1:${port}`, '--zmq-replay', `tcp://127.0.0.1:${replayPort}`, '--zmq-instance', 'kvpool', '--zmq-model', 'm', '--zmq-hold', '5']),
    );
    const dealer = new zmq!.Dealer({ receiveTimeout: 5000 });
    try {
      dealer.connect(`tcp://127.0.0.1:${replayPort}`);
      await over;
      const batches = await replay(dealer, 0n, 'topic');
      const r = await run;
      expect(r.code).toBe(0);
      expect(r.err).toMatch(/rank 0 publishes on tcp:\/\/127\.0\.0\.1:\d+ topic kv@kvpool@m, replays on tcp:\/\/127\.0\.0\.1:\d+/);
      const result = JSON.parse(r.out);
      expect(strip(result)).toEqual(strip(JSON.parse(JSON.stringify(replaySync({ requests: 60, numBlocks: 300, maxRunning: 4 })))));
      expect(batches.map(([s]) => s)).toEqual(batches.map((_, i) => BigInt(i)));
      expect(batches.every(([, , t]) => t === 'kv@kvpool@m')).toBe(true);
      const idx = new KVEventIndex();
      for (const [, b] of batches) idx.applyBatch('kvpool', readBatch(b));
      expect(idx.blocks('kvpool').length).toBe(result.cachedBlocksAtEnd);
      expect(idx.sourcesInfo()[0]!.waiting).toBe(0);
    } finally {
      restore();
      dealer.close();
    }
  });
});

describe.skipIf(zmq === null)('kvpool replay --engine vllm --zmq', () => {
  it('publishes every step, one publisher per dp rank; a router that replays each from 0 (counting copies) holds each rank\'s keys', async () => {
    const [port, replayPort] = [await freePort(), await freePort()];
    const args = ['replay', '--json', '--no-progress', '--requests', '60', '--engine', 'vllm', '--num-blocks', '400', '--max-num-seqs', '4', '--max-num-batched-tokens', '512', '--dp-size', '2'];
    const { run, seen: over, restore } = captureUntil('replay done', () =>
      main([...args, '--zmq', `tcp://127.0.0.1:${port}`, '--zmq-replay', `tcp://127.0.0.1:${replayPort}`, '--zmq-instance', 'kvpool', '--zmq-model', 'm', '--zmq-hold', '5']),
    );
    const dealers = [0, 1].map(() => new zmq!.Dealer({ receiveTimeout: 5000 }));
    try {
      dealers.forEach((d, k) => d.connect(`tcp://127.0.0.1:${replayPort + k}`));
      await over;
      const streams = await Promise.all(dealers.map((d) => replay(d, 0n, 'topic')));
      const r = await run;
      expect(r.code).toBe(0);
      const result = JSON.parse(r.out);
      const expected = replayVllmSync({ engine: 'vllm', requests: 60, numBlocks: 400, maxNumSeqs: 4, maxNumBatchedTokens: 512, dpSize: 2 });
      for (const k of ['evictedBlocks', 'idChecksum', 'matchedBlocks', 'steps'] as const) expect(result[k]).toBe(expected[k]);
      expect(expected.evictedBlocks).toBeGreaterThan(0);
      for (const k of [0, 1]) {
        const batches = streams[k]!;
        expect(batches.map(([s]) => s)).toEqual(batches.map((_, i) => BigInt(i)));
        const idx = new KVEventIndex({ countCopies: true });
        for (const [, b] of batches) idx.applyBatch('kvpool', readBatch(b));
        expect(idx.blocks('kvpool', k).length).toBe(expected.ranks[k]!.cachedKeysAtEnd);
      }
    } finally {
      restore();
      for (const d of dealers) d.close();
    }
  });
});

describe('rankEndpoint', () => {
  it('offsets a tcp port by the rank and suffixes inproc and ipc, as vLLM does', () => {
    expect(rankEndpoint('tcp://*:5557', 0)).toBe('tcp://*:5557');
    expect(rankEndpoint('tcp://*:5557', 3)).toBe('tcp://*:5560');
    expect(rankEndpoint('tcp://[::1]:5557', 1)).toBe('tcp://[::1]:5558');
    expect(rankEndpoint('inproc://cache', 2)).toBe('inproc://cache_dp2');
    expect(rankEndpoint('ipc:///tmp/kv', 1)).toBe('ipc:///tmp/kv_dp1');
    expect(() => rankEndpoint('tcp://*:65535', 1)).toThrow(/port 65536 .* is past 65535/);
    expect(() => rankEndpoint('tcp://host', 1)).toThrow(/endpoint must be tcp:\/\/host:port/);
    expect(() => rankEndpoint('tcp://*:1', -1)).toThrow(/dpRank must be >= 0/);
  });
});
