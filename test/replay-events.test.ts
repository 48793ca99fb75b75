// Replay with events: the same results as without (a host tier's too), a
// stream a router can follow to the final cache, and `kvpool replay --events
// FILE` writing vLLM KVEventBatch msgpack in either form, read back by the
// test's reader of vLLM's format.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { decodeVllmEventBatches } from '../bindings/events/vllm-decode.js';
import type { KVEvent } from '../bindings/managers/kv-events.js';
import { replaySync } from '../bindings/replay/replay.js';
import { replayWithEvents } from '../bindings/replay/replay-events.js';
import { capture } from './support/capture.js';
import { readBatches, type ReadBatch } from './support/vllm-wire.js';

const OPTS = { requests: 300, numBlocks: 600, blockSize: 16, maxRunning: 8 };
const strip = ({ seconds: _s, allocateCallsPerSecond: _a, ...rest }: ReturnType<typeof replaySync>) => rest;

/**
 * A router over vLLM wire events (read by the test's reader of vLLM's
 * format): the set of hashes it knows; throws when it cannot follow. A pool
 * caches a chain from its first unshared block, so every parent it names is
 * known.
 */
function followWire(batches: ReadBatch[], form: 'map' | 'positional'): Set<bigint> {
  const known = new Set<bigint>();
  let lastTs = -1;
  for (const b of batches) {
    expect(b.dataParallelRank).toBe(0);
    expect(b.ts).toBeGreaterThanOrEqual(lastTs);
    expect(b.forms.every((f) => f === form)).toBe(true);
    lastTs = b.ts;
    for (const e of b.events) {
      if (e.type === 'BlockStored') {
        const parent = e.parentBlockHash as bigint | null;
        if (parent !== null && !known.has(parent)) throw new Error(`unknown parent ${parent}`);
        expect(e.tokenIds.length).toBe(e.blockHashes.length * e.blockSize);
        for (const h of e.blockHashes as bigint[]) {
          if (known.has(h)) throw new Error(`stored twice: ${h}`);
          known.add(h);
        }
      } else if (e.type === 'BlockRemoved') {
        for (const h of e.blockHashes as bigint[]) if (!known.delete(h)) throw new Error(`removed unknown ${h}`);
      } else known.clear();
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

  it('with a host tier: the same result, and the host tier\'s blocks announced with medium "CPU"', () => {
    const opts = { ...OPTS, hostBlocks: 400 };
    const all: KVEvent[] = [];
    const withEvents = replayWithEvents(opts, (events) => all.push(...events));
    expect(strip(withEvents)).toEqual(strip(replaySync(opts)));
    const cpu = all.filter((e) => e.medium === 'CPU');
    expect(cpu.filter((e) => e.type === 'stored').length).toBeGreaterThan(0);
    expect(cpu.filter((e) => e.type === 'removed').length).toBeGreaterThan(0);
  });

  for (const form of ['map', 'positional'] as const) {
    it(`kvpool replay --events FILE --events-format ${form} writes batches a router follows to the final cache`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'kvpool-events-'));
      const file = join(dir, 'events.msgpack');
      const r = await capture(() =>
        main(['replay', '--json', '--requests', '300', '--num-blocks', '600', '--max-running', '8', '--events', file, '--events-format', form]),
      );
      expect(r.code).toBe(0);
      const result = JSON.parse(r.out);
      expect(strip(result)).toEqual(strip(JSON.parse(JSON.stringify(replaySync(OPTS)))));
      const bytes = readFileSync(file);
      const batches = readBatches(bytes);
      expect(batches.length).toBeGreaterThan(10);
      // The library reads the file as the test's reader does.
      expect(decodeVllmEventBatches(bytes)).toEqual(batches.map(({ forms: _f, ...b }) => b));
      const known = followWire(batches, form);
      expect(known.size).toBe(result.cachedBlocksAtEnd);
      rmSync(dir, { recursive: true });
    });
  }

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
