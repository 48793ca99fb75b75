// The vLLM engine's KV events in vLLM's own order: on a recorded run where
// vLLM's KVCacheManager published its events (test/fixtures/vllm/
// events_n400.*: 35 preemptions, rejections, truncations), kvpool's engine
// records, block by block, the same sequence -- a stored block (named by
// its first and last token) when vLLM caches it, a removal when vLLM
// evicts. Hashes differ (vLLM's sha256, kvpool's XXH3-128), so they are
// checked for consistency instead: a removal names the key its block was
// stored under, and a stored block's parent is the block before it.

import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { VllmEngine } from '../bindings/vllm/engine.js';
import { VllmKvCacheManager, type VllmKvEvent } from '../bindings/vllm/kv-cache-manager.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { TRACE_PATH } from './support/externals.js';
import { FIXTURES, harnessRun } from './support/vllm-fixtures.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('the vLLM engine\'s KV events', () => {
  it('come in vLLM\'s order, block for block, and name consistent keys', async () => {
    const h = harnessRun('events_n400');
    const c = h.config;
    const trace = await readTraceFile(TRACE_PATH, c.limit!);
    const kv = new VllmKvCacheManager({ numBlocks: c.numBlocks, blockSize: c.blockSize });
    kv.recordEvents(true);
    const engine = new VllmEngine([kv], { maxNumSeqs: c.maxRunning, maxNumBatchedTokens: c.maxNumBatchedTokens, longPrefillTokenThreshold: 0, reserveFullIsl: false });
    const s = engine.schedulers[0]!;
    let next = 0;
    const events: VllmKvEvent[] = [];
    let lines = '';
    for (;;) {
      while (s.waiting.length <= c.maxRunning && next < trace.length) s.add(new VllmRequest(next, trace[next++]!));
      if (!engine.hasWork) break;
      engine.schedule(null);
      engine.complete();
      for (const e of kv.drainEvents()) {
        events.push(e);
        lines += e.type === 'stored' ? `S ${e.tokenIds[0]} ${e.tokenIds[e.tokenIds.length - 1]}\n` : 'R\n';
      }
    }
    const expected = gunzipSync(readFileSync(`${FIXTURES}events_n400.events.gz`)).toString('utf8');
    expect(lines.split('\n').length).toBe(expected.split('\n').length);
    expect(lines === expected).toBe(true);
    expect(events.filter((e) => e.type === 'removed').length).toBe(h.evictedBlocks);
    // What each block holds now, from the events alone.
    const keyOf = new Map<number, string>();
    for (const e of events) {
      if (e.type === 'stored') {
        expect(keyOf.has(e.blockId), `block ${e.blockId} stored twice without a removal`).toBe(false);
        keyOf.set(e.blockId, hex(e.hash));
        expect(e.tokenIds.length).toBe(c.blockSize);
        expect(e.parentHash === null || e.parentHash.length === 16).toBe(true);
      } else {
        expect(keyOf.get(e.blockId)).toBe(hex(e.hash));
        keyOf.delete(e.blockId);
      }
    }
    expect(keyOf.size).toBe(h.cachedBlocksAtEnd);
    // A stored block's parent is the key of its request's block before it (stored earlier, maybe by another request).
    const stored = events.filter((e) => e.type === 'stored');
    const keys = new Set(stored.map((e) => hex(e.hash)));
    for (const e of stored) if (e.parentHash !== null) expect(keys.has(hex(e.parentHash))).toBe(true);
    expect(kv.drainEvents()).toEqual([]);
    kv.recordEvents(false);
    kv.dispose();
  });
});
