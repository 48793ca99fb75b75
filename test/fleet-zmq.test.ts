// `kvpool fleet --zmq`: each engine publishes its own vLLM event stream
// (port + engine, topic kv@engine-<e>@<model>); a router replaying an
// engine's stream from 0 reaches exactly that engine's final cache, also with
// the engines on threads, all connected to one endpoint (--zmq-ranks topic)
// and in the positional form with bytes hashes. Needs the
// zeromq package (a dev dependency; required under CI).

import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { captureUntil, type Captured } from './support/capture.js';
import { external } from './support/externals.js';
import { readBatch } from './support/vllm-wire.js';

interface Dealer {
  connect(endpoint: string): void;
  send(frames: Uint8Array[]): Promise<void>;
  receive(): Promise<Buffer[]>;
  close(): void;
}

interface Subscriber {
  bind(endpoint: string): Promise<void>;
  subscribe(topic: string): void;
  receive(): Promise<Buffer[]>;
  close(): void;
  readonly lastEndpoint: string | null;
}

let zmq: { Dealer: new (o: { receiveTimeout: number }) => Dealer; Subscriber: new (o: { receiveTimeout: number }) => Subscriber } | null = null;
try {
  const name = 'zeromq'; // not resolved at compile time: the dependency is optional
  zmq = (await import(name)) as typeof zmq;
} catch (e) {
  external('the zeromq package', false, `it cannot be loaded (${(e as Error).message}); npm install zeromq`);
}

/** Two consecutive free TCP ports on loopback (engine e uses port + e). */
async function freePorts(): Promise<number> {
  const take = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const s = createServer();
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
  for (;;) {
    const p = await take(0);
    if (await take(p + 1).then(() => true, () => false)) return p;
  }
}

/** Every batch the replay endpoint holds from sequence 0: [topic, payload]. */
async function replayAll(dealer: Dealer): Promise<Array<[string, Uint8Array]>> {
  await dealer.send([new Uint8Array(0), new Uint8Array(8)]);
  const out: Array<[string, Uint8Array]> = [];
  for (;;) {
    const [, topic, seq, payload] = await dealer.receive();
    if (new DataView(seq!.buffer, seq!.byteOffset, 8).getBigInt64(0, false) === -1n) return out;
    out.push([topic!.toString(), new Uint8Array(payload!)]);
  }
}

/**
 * Runs a two-engine `kvpool fleet --zmq ... --zmq-hold` command and, once it
 * says it is done, replays both engines' streams from their replay
 * endpoints (replayPort + e): the command's output and the two streams.
 */
async function runAndReplay(args: string[], replayPort: number): Promise<{ r: Captured; streams: Array<Array<[string, Uint8Array]>> }> {
  const { run, seen: over, restore } = captureUntil('fleet done', () => main(args));
  const dealers = [0, 1].map(() => new zmq!.Dealer({ receiveTimeout: 5000 }));
  try {
    dealers.forEach((d, e) => d.connect(`tcp://127.0.0.1:${replayPort + e}`));
    await over;
    const streams = await Promise.all(dealers.map(replayAll));
    return { r: await run, streams };
  } finally {
    restore();
    for (const d of dealers) d.close();
  }
}

describe.skipIf(zmq === null)('kvpool fleet --zmq', () => {
  it('publishes each engine on its own port and topic; replaying a stream rebuilds that engine\'s cache', async () => {
    const [port, replayPort] = [await freePorts(), await freePorts()];
    const args = ['fleet', '--json', '--no-progress', '--requests', '80', '--engines', '2', '--router', 'precise-prefix', '--num-blocks', '300', '--max-running', '4'];
    const { r, streams } = await runAndReplay([...args, '--zmq', `tcp://127.0.0.1:${port}`, '--zmq-replay', `tcp://127.0.0.1:${replayPort}`, '--zmq-model', 'm', '--zmq-hold', '5'], replayPort);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(new RegExp(`engine 1 publishes on tcp://127\\.0\\.0\\.1:${port + 1} topic kv@engine-1@m, replays on tcp://127\\.0\\.0\\.1:${replayPort + 1}`));
    const lib = fleetSync({ requests: 80, engines: 2, router: 'precise-prefix', numBlocks: 300, maxRunning: 4 });
    expect(JSON.parse(r.out).matchedBlocks).toBe(lib.matchedBlocks);
    for (const e of [0, 1]) {
      expect(streams[e]!.length).toBeGreaterThan(0);
      expect(streams[e]!.every(([topic]) => topic === `kv@engine-${e}@m`)).toBe(true);
      const idx = new KVEventIndex();
      for (const [, b] of streams[e]!) idx.applyBatch('x', readBatch(b));
      expect(idx.blocks('x').length).toBe(lib.engines[e]!.run.cachedBlocksAtEnd);
    }
  }, 30_000);

  it('--engine vllm: each engine publishes its vLLM stream, in vLLM\'s order; replaying it (counting copies) rebuilds that engine\'s keys', async () => {
    const [port, replayPort] = [await freePorts(), await freePorts()];
    const args = ['fleet', '--json', '--no-progress', '--requests', '80', '--engine', 'vllm', '--engines', '2', '--router', 'precise-prefix', '--num-blocks', '400', '--max-num-seqs', '4', '--max-num-batched-tokens', '512'];
    const { r, streams } = await runAndReplay([...args, '--zmq', `tcp://127.0.0.1:${port}`, '--zmq-replay', `tcp://127.0.0.1:${replayPort}`, '--zmq-model', 'm', '--zmq-hold', '5'], replayPort);
    expect(r.code).toBe(0);
    const lib = fleetSync({ requests: 80, engine: 'vllm', engines: 2, router: 'precise-prefix', numBlocks: 400, maxNumSeqs: 4, maxNumBatchedTokens: 512 });
    expect(JSON.parse(r.out).matchedBlocks).toBe(lib.matchedBlocks);
    expect(lib.evictedBlocks).toBeGreaterThan(0);
    for (const e of [0, 1]) {
      expect(streams[e]!.length).toBeGreaterThan(0);
      expect(streams[e]!.every(([topic]) => topic === `kv@engine-${e}@m`)).toBe(true);
      const idx = new KVEventIndex({ countCopies: true });
      for (const [, b] of streams[e]!) idx.applyBatch('x', readBatch(b));
      expect(idx.blocks('x').length).toBe((lib.engines[e]!.run as { cachedKeysAtEnd: number }).cachedKeysAtEnd);
    }
  }, 30_000);

  it('--threads, --zmq-ranks topic, --events-format positional --event-hashes bytes: every engine connects to one endpoint, the streams still rebuild each cache', async () => {
    const replayPort = await freePorts();
    const sub = new zmq!.Subscriber({ receiveTimeout: 200 });
    await sub.bind('tcp://127.0.0.1:*');
    sub.subscribe('kv@');
    const args = ['fleet', '--json', '--no-progress', '--requests', '80', '--engines', '2', '--router', 'precise-prefix', '--num-blocks', '300', '--max-running', '4', '--threads', '2'];
    try {
      const { r, streams } = await runAndReplay([...args, '--zmq', sub.lastEndpoint!, '--zmq-ranks', 'topic', '--events-format', 'positional', '--event-hashes', 'bytes',
        '--zmq-replay', `tcp://127.0.0.1:${replayPort}`, '--zmq-model', 'm', '--zmq-delay', '1', '--zmq-hold', '5'], replayPort);
      expect(r.code).toBe(0);
      expect(r.err).toMatch(new RegExp(`engine 1 publishes on ${sub.lastEndpoint!.replace(/\./g, '\\.')} topic kv@engine-1@m`));
      const lib = fleetSync({ requests: 80, engines: 2, router: 'precise-prefix', numBlocks: 300, maxRunning: 4 });
      expect(JSON.parse(r.out).matchedBlocks).toBe(lib.matchedBlocks);
      // Both engines on the router's one endpoint, told apart by topic (the replay servers echo each stream's topic).
      expect(r.err).toMatch(new RegExp(`engine 0 publishes on ${sub.lastEndpoint!.replace(/\./g, '\\.')} topic kv@engine-0@m`));
      for (const e of [0, 1]) expect(streams[e]!.every(([topic]) => topic === `kv@engine-${e}@m`)).toBe(true);
      for (const e of [0, 1]) {
        expect(streams[e]!.length).toBeGreaterThan(0);
        const idx = new KVEventIndex();
        for (const [, b] of streams[e]!) {
          const batch = readBatch(b);
          idx.applyBatch('x', batch);
        }
        const held = idx.blocks('x');
        expect(held.length).toBe(lib.engines[e]!.run.cachedBlocksAtEnd);
        expect(held.every((b) => typeof b.hash === 'string' && b.hash.length === 32)).toBe(true); // 16 bytes, hex
      }
    } finally {
      sub.close();
    }
  }, 40_000);
});
