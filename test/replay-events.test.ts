// Replay with events: the same results as without, a stream a router can
// follow to the final cache, and `kvpool replay --events FILE` writing vLLM
// KVEventBatch msgpack a router-side decoder reads back.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeMulti } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import type { KVEvent } from '../bindings/managers/kv-events.js';
import { replaySync } from '../bindings/replay/replay.js';
import { replayWithEvents } from '../bindings/replay/replay-events.js';
import { capture } from './support/capture.js';

const OPTS = { requests: 300, numBlocks: 600, blockSize: 16, maxRunning: 8 };
const strip = ({ seconds: _s, allocateCallsPerSecond: _a, ...rest }: ReturnType<typeof replaySync>) => rest;

/** A router over vLLM wire events: the set of hashes it knows; throws when it cannot follow. */
function followWire(batches: unknown[]): Set<bigint> {
  const known = new Set<bigint>();
  let lastTs = -1;
  for (const b of batches) {
    const [ts, events, rank] = b as [number, unknown[][], number];
    expect(rank).toBe(0);
    expect(ts).toBeGreaterThanOrEqual(lastTs);
    lastTs = ts;
    for (const e of events) {
      if (e[0] === 'BlockStored') {
        const [, hashes, parent, tokens, blockSize] = e as [string, bigint[], bigint | null, number[], number];
        if (parent !== null && !known.has(parent)) throw new Error(`unknown parent ${parent}`);
        expect(tokens.length).toBe(hashes.length * blockSize);
        for (const h of hashes) {
          if (known.has(h)) throw new Error(`stored twice: ${h}`);
          known.add(h);
        }
      } else if (e[0] === 'BlockRemoved') {
        for (const h of e[1] as bigint[]) if (!known.delete(h)) throw new Error(`removed unknown ${h}`);
      } else {
        expect(e).toEqual(['AllBlocksCleared']);
        known.clear();
      }
    }
  }
  return known;
}

describe('replay with events', () => {
  it('gives the same result as without, one non-empty batch per step, a stream that ends at the final cache', () => {
    const plain = replaySync(OPTS);
    const steps: number[] = [];
    const all: KVEvent[] = [];
    const withEvents = replayWithEvents(OPTS, (events, step) => {
      expect(events.length).toBeGreaterThan(0);
      steps.push(step);
      all.push(...events);
    });
    expect(strip(withEvents)).toEqual(strip(plain));
    expect(plain.evictedBlocks).toBeGreaterThan(0); // the run does evict
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    expect(new Set(steps).size).toBe(steps.length);
    expect(all.filter((e) => e.type === 'removed').length).toBe(plain.evictedBlocks);
    const stored = all.filter((e) => e.type === 'stored').length;
    expect(stored - plain.evictedBlocks).toBe(plain.cachedBlocksAtEnd);
  });

  it('kvpool replay --events FILE writes msgpack batches a router follows', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-events-'));
    const file = join(dir, 'events.msgpack');
    const r = await capture(() => main(['replay', '--json', '--requests', '300', '--num-blocks', '600', '--max-running', '8', '--events', file]));
    expect(r.code).toBe(0);
    const result = JSON.parse(r.out);
    const batches = [...decodeMulti(readFileSync(file), { useBigInt64: true })];
    expect(batches.length).toBeGreaterThan(10);
    const known = followWire(batches);
    expect(known.size).toBe(result.cachedBlocksAtEnd);
    rmSync(dir, { recursive: true });
  });

  it('reports a file it cannot write', async () => {
    const err: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((s: string) => (err.push(s), true)) as typeof process.stderr.write;
    try {
      expect(await main(['replay', '--requests', '5', '--no-progress', '--events', '/nonexistent/dir/e.msgpack'])).toBe(1);
    } finally {
      process.stderr.write = write;
    }
    expect(err.join('')).toMatch(/cannot write events to "\/nonexistent\/dir\/e.msgpack"/);
  });
});
