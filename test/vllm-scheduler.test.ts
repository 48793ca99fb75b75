// vLLM's scheduler step by step (bindings/vllm/): a hand-worked run with the
// batch each step reports to a timing model, the DP load balancer's rule,
// and the step API's refusals. Whole runs against vLLM's own are in
// test/vllm-harness.test.ts.

import { describe, expect, it } from 'vitest';
import { emptyStepBatch, type TraceRequest } from '../bindings/index.js';
import { VllmEngine } from '../bindings/vllm/engine.js';
import { vllmMetrics, vllmMetricsText } from '../bindings/vllm/metrics.js';
import { openVllmEngine } from '../bindings/vllm/open-engine.js';
import { VllmScheduler } from '../bindings/vllm/scheduler.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { ModelVllmKv } from './support/vllm-model-kv.js';
import { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';

const req = (hashIds: number[], inputLength: number, outputLength: number): TraceRequest => ({ inputLength, outputLength, hashIds: Int32Array.from(hashIds) });
const config = { maxNumSeqs: 2, maxNumBatchedTokens: 40, longPrefillTokenThreshold: 0, reserveFullIsl: false };

describe('the vLLM scheduler, step by step', () => {
  // Blocks of 16 tokens, 15 usable, 2 sequences, 40 tokens a step.
  // r0: 40 tokens of chunk 1, 2 outputs. r1: 20 tokens of chunk 2, 1 output.
  // r2: r0's prompt again, 1 output.
  // Step 1: r0 is admitted with its 40 tokens (a chunk after 0 cached
  //   tokens): the whole budget. It samples its first output.
  // Step 2: r0 decodes (context 41: its 40 prompt tokens and the output);
  //   r1 is admitted (20 tokens, the 39 left of the budget allow it); the
  //   two sequences are the limit. r0 gives its 2nd output, r1 its only
  //   one: both finish.
  // Step 3: r2 hits r0's two full blocks (cached when r0 was admitted;
  //   floor(39 / 16) = 2 may be looked up) and computes the last 8 tokens.
  it('schedules running requests first, admits while budget and sequences last, and reports each chunk and decode', () => {
    const kv = new ModelVllmKv(16, 16);
    const engine = new VllmEngine([kv], config);
    const trace = [req([1], 40, 2), req([2], 20, 1), req([1], 40, 1)];
    trace.forEach((t, r) => engine.add(new VllmRequest(r, t)));
    const batch = emptyStepBatch();

    engine.schedule(batch);
    expect([batch.chunkTokens, batch.chunkContextTokens, batch.decodeContexts, batch.cachedTokens]).toEqual([[40], [0], [], 0]);
    engine.complete();
    expect(engine.last).toEqual({ step: 1, scheduledTokens: 40, scheduledRequests: 1, admitted: 1, preempted: 0, finished: 0, freeBlocks: 12 });

    engine.schedule(batch);
    expect([batch.chunkTokens, batch.chunkContextTokens, batch.decodeContexts, batch.decodeRanks]).toEqual([[20], [0], [41], [0]]);
    engine.complete();
    expect(engine.last).toEqual({ step: 2, scheduledTokens: 21, scheduledRequests: 2, admitted: 1, preempted: 0, finished: 2, freeBlocks: 15 });

    engine.schedule(batch);
    expect([batch.chunkTokens, batch.chunkContextTokens, batch.cachedTokens, batch.prefillTokens]).toEqual([[8], [32], 32, 8]);
    engine.complete();
    expect(engine.last.finished).toBe(1);
    expect(engine.hasWork).toBe(false);
    const counts = engine.schedulers[0]!.counts;
    expect([counts.admitted, counts.promptBlocks, counts.matchedBlocks, counts.finished]).toEqual([3, 2 + 1 + 2, 2, 3]);
    kv.check();
  });

  it('preempts the newest running request when blocks run out, admits nothing in that step, and resumes it later with its hits', () => {
    // 4 usable blocks of 16 tokens; two 31-token prompts with 20 outputs each.
    const kv = new ModelVllmKv(5, 16);
    const engine = new VllmEngine([kv], { ...config, maxNumBatchedTokens: 1000 });
    engine.add(new VllmRequest(0, req([1], 31, 20)));
    engine.add(new VllmRequest(1, req([2], 31, 20)));
    engine.schedule(null);
    engine.complete(); // both admitted: 2 blocks each, none free
    expect(engine.last).toMatchObject({ admitted: 2, freeBlocks: 0 });
    // Step 2: r0 has 32 tokens, fits; r1 too (slots for 32 = 2 blocks).
    engine.schedule(null);
    engine.complete();
    expect(engine.last.preempted).toBe(0);
    // Step 3: r0 needs a 3rd block: r1 (the newest) is preempted, r0 goes on.
    engine.schedule(null);
    expect(engine.last.step).toBe(2);
    engine.complete();
    expect(engine.last).toMatchObject({ step: 3, scheduledRequests: 1, preempted: 1, admitted: 0 });
    const s = engine.schedulers[0]!;
    expect(s.waiting.peek()!.index).toBe(1);
    expect(s.waiting.peek()!.numComputed).toBe(0);
    while (engine.hasWork) {
      engine.schedule(null);
      engine.complete();
      kv.check();
    }
    expect(s.counts).toMatchObject({ finished: 2, preemptions: 1, resumedPrefills: 1, rejected: 0, truncated: 0 });
  });

  it('drops a request that cannot fit even alone: rejected before it gave a token', () => {
    const kv = new ModelVllmKv(4, 16); // 3 usable blocks: 48 tokens
    const engine = new VllmEngine([kv], { ...config, maxNumBatchedTokens: 1000 });
    engine.add(new VllmRequest(0, req([1, 2], 600, 1)));
    engine.add(new VllmRequest(1, req([3], 20, 1)));
    engine.schedule(null);
    expect(engine.schedulers[0]!.dropped?.index).toBe(0);
    engine.complete();
    expect(engine.last).toEqual({ step: 1, scheduledTokens: 0, scheduledRequests: 0, admitted: 0, preempted: 0, finished: 0, freeBlocks: 3 });
    engine.schedule(null);
    engine.complete();
    expect(engine.last.finished).toBe(1);
    expect(engine.schedulers[0]!.counts).toMatchObject({ rejected: 1, truncated: 0, finished: 1, promptBlocks: 1 });
  });

  it('drops a request that preempts itself again, alone, without getting further (vLLM would loop on it forever)', () => {
    // 3 usable blocks of 16 tokens (48 tokens) and a 49-token prompt, 5 tokens a step.
    // Steps 1-9 compute 45 tokens (blocks 0 and 1 full, so cached). Step 10 needs slots for
    // 49 tokens, 4 blocks: it preempts itself at 45. Step 11 readmits it with 2 hit blocks
    // (block 2 was never full), steps 11-13 reach 47, step 14 preempts it again at 47 (further:
    // it goes on). Steps 15-17 reach 47 again; at step 18 it would preempt itself at 47 again:
    // dropped, rejected (it never gave a token). vLLM's harness would loop.
    const kv = new ModelVllmKv(4, 16);
    const engine = new VllmEngine([kv], { ...config, maxNumBatchedTokens: 5 });
    engine.add(new VllmRequest(0, req([1], 49, 0)));
    const lines: string[] = [];
    while (engine.hasWork) {
      engine.schedule(null);
      engine.complete();
      lines.push(`${engine.last.scheduledTokens}/${engine.last.preempted}`);
      kv.check();
    }
    expect(lines).toEqual(['5/0', '5/0', '5/0', '5/0', '5/0', '5/0', '5/0', '5/0', '5/0', '0/1', '5/0', '5/0', '5/0', '0/1', '5/0', '5/0', '5/0', '0/0']);
    expect(engine.schedulers[0]!.counts).toMatchObject({ rejected: 1, truncated: 0, preemptions: 2, finished: 0 });
    expect(engine.schedulers[0]!.dropped?.index).toBe(0);
  });

  it('up to that drop, the steps are vLLM\'s own (whose harness, on the same request, cycles on for ever)', async () => {
    const { readFileSync } = await import('node:fs');
    const { FIXTURES } = await import('./support/vllm-fixtures.js');
    const { parseTrace } = await import('../bindings/index.js');
    const { stepLine } = await import('../bindings/vllm/engine.js');
    const theirs = readFileSync(`${FIXTURES}loop.head.steps`, 'utf8').split('\n').filter((l) => l !== '');
    const kv = new ModelVllmKv(4, 16);
    const engine = new VllmEngine([kv], { ...config, maxNumBatchedTokens: 5 });
    engine.add(new VllmRequest(0, parseTrace(readFileSync(`${FIXTURES}loop.jsonl`, 'utf8'))[0]!));
    const ours: string[] = [];
    while (engine.hasWork) {
      engine.schedule(null);
      engine.complete();
      ours.push(stepLine(engine.last).trim());
    }
    expect(ours.slice(0, 17)).toEqual(theirs.slice(0, 17));
    // vLLM preempts it a third time at step 18 and goes on (the same four steps again and again); kvpool drops it.
    expect(theirs.slice(17, 18)).toEqual(['18 0 0 0 1 0 3']);
    expect(theirs.slice(18, 22).map((l) => l.split(' ').slice(1).join(' '))).toEqual(theirs.slice(14, 18).map((l) => l.split(' ').slice(1).join(' ')));
    expect(ours.length).toBe(18);
    expect(ours[17]).toBe('18 0 0 0 0 0 3');
  });

  it('sends a new request to the rank with the smallest 4 x waiting + running, the lowest on ties', () => {
    const kvs = [new ModelVllmKv(64, 16), new ModelVllmKv(64, 16), new ModelVllmKv(64, 16)];
    const engine = new VllmEngine(kvs, { ...config, maxNumSeqs: 8, maxNumBatchedTokens: 1000 });
    const r = (i: number) => new VllmRequest(i, req([i], 16, 50));
    // All arriving at once: round robin.
    expect([0, 1, 2, 3, 4].map((i) => engine.add(r(i)))).toEqual([0, 1, 2, 0, 1]);
    engine.schedule(null);
    engine.complete();
    // Now running 2, 2, 1 and nothing waits: scores 2, 2, 1.
    expect(engine.add(r(5))).toBe(2);
    // Scores 2, 2, 1 + 4 = 5: rank 0 (tied with 1, lower).
    expect(engine.add(r(6))).toBe(0);
    // 6, 2, 5.
    expect(engine.add(r(7))).toBe(1);
  });

  it('refuses a step before the last one completed, completing one never scheduled, and re-queuing a request', () => {
    const engine = new VllmEngine([new ModelVllmKv(16, 16)], config);
    const a = new VllmRequest(0, req([1], 20, 1));
    engine.add(a);
    expect(() => engine.complete()).toThrow(/no step to complete/);
    engine.schedule(null);
    expect(() => engine.schedule(null)).toThrow(/not complete yet/);
    engine.complete();
    expect(() => engine.add(a)).toThrow(/queued before/);
  });

  it('refuses bad arguments with a TypeError or RangeError naming them, before anything changes', () => {
    const kv = new ModelVllmKv(16, 16);
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ maxNumSeqs: 0 }, /^config\.maxNumSeqs must be >= 1, got 0$/],
      [{ maxNumSeqs: 1.5 }, /^config\.maxNumSeqs must be an integer, got 1\.5$/],
      [{ maxNumBatchedTokens: 0 }, /^config\.maxNumBatchedTokens must be >= 1, got 0$/],
      [{ maxNumBatchedTokens: Number.NaN }, /^config\.maxNumBatchedTokens must be an integer, got NaN$/],
      [{ maxNumBatchedTokens: undefined }, /^config\.maxNumBatchedTokens must be a number, got undefined$/],
      [{ longPrefillTokenThreshold: -1 }, /^config\.longPrefillTokenThreshold must be >= 0, got -1$/],
      [{ reserveFullIsl: 'yes' }, /^config\.reserveFullIsl must be a boolean, got "yes"$/],
    ];
    for (const [change, message] of bad) expect(() => new VllmEngine([kv], { ...config, ...change } as never)).toThrow(message);
    expect(() => new VllmEngine([kv], null as never)).toThrow(new TypeError('config must be an object, got null'));
    expect(() => new VllmEngine([] as never, config)).toThrow(/^kvs must be a non-empty array of KV caches, one per dp rank, got an array of length 0$/);
    expect(() => new VllmEngine(kv as never, config)).toThrow(TypeError);
    expect(() => new VllmEngine([kv, 5] as never, config)).toThrow(/^kvs\[1\] must be a VllmKvCache \(a VllmKvCacheManager\), got 5$/);
    expect(() => new VllmEngine([kv, kv], config)).toThrow(new RangeError('kvs[1] is kvs[0]: each dp rank needs its own KV cache'));
    expect(() => new VllmScheduler(kv, config, -1)).toThrow(/^rank must be >= 0, got -1$/);
    expect(() => new VllmScheduler({ blockSize: 16 } as never, config)).toThrow(/^kv must be a VllmKvCache \(a VllmKvCacheManager\): its numFreeBlocks is undefined/);

    // The configuration is the one checked, not the caller's object to change later.
    const given = { ...config };
    const engine = new VllmEngine([kv, new ModelVllmKv(16, 16)], given);
    given.maxNumSeqs = 0;
    expect(engine.schedulers[1]!.config.maxNumSeqs).toBe(2);

    const a = new VllmRequest(0, req([1], 20, 1));
    expect(() => engine.add(null as never)).toThrow(new TypeError('req must be a VllmRequest, got null'));
    expect(() => engine.add({ index: 0, status: 0, numComputed: 0, numOutputs: 0 } as never)).toThrow(/^req must be a VllmRequest, got an Object$/);
    for (const rank of [2, -1, 0.5]) expect(() => engine.addTo(rank, a)).toThrow(/^rank must be/);
    expect(engine.waiting).toBe(0);
    engine.add(a);
    // Queued once only, even before any step ran.
    expect(() => engine.add(a)).toThrow(/request 0 was queued before/);
    expect(() => engine.addTo(1, a)).toThrow(/request 0 was queued before/);
    expect(engine.waiting).toBe(1);

    for (const batch of [undefined, {}, { ...emptyStepBatch(), decodeRanks: 3 }]) {
      expect(() => engine.schedule(batch as never)).toThrow(/^batch must be a StepBatch \(emptyStepBatch\(\)\) or null/);
    }
    expect(engine.steps).toBe(0);
    expect(a.status).toBe(0);
    engine.schedule(emptyStepBatch());
    engine.complete();
    expect(engine.last).toMatchObject({ step: 1, scheduledTokens: 20, finished: 1 });
  });

  it('opens an engine only from a spec whose every field is good, and reads metrics only of an engine', () => {
    const spec = { numBlocks: 64, blockSize: 16, seed: 0, dpSize: 2, maxNumSeqs: 4, maxNumBatchedTokens: 64, longPrefillTokenThreshold: 0, reserveFullIsl: true };
    expect(() => openVllmEngine({ ...spec, dpSize: 'x' } as never)).toThrow(new TypeError('spec.dpSize must be a number, got "x"'));
    expect(() => openVllmEngine({ ...spec, dpSize: 0 })).toThrow(/^spec\.dpSize must be in \[1, 4096\], got 0$/);
    expect(() => openVllmEngine({ ...spec, maxNumSeqs: 0 })).toThrow(/^spec\.maxNumSeqs must be >= 1, got 0$/);
    expect(() => openVllmEngine({ ...spec, numBlocks: 1 })).toThrow(/^spec\.numBlocks must be >= 2, got 1$/);
    expect(() => openVllmEngine(null as never)).toThrow(new TypeError('spec must be an object, got null'));
    const open = openVllmEngine(spec);
    expect(open.engine.dpSize).toBe(2);
    open.dispose();
    for (const e of [null, {}, { schedulers: 3 }]) expect(() => vllmMetrics(e as never)).toThrow(/^engine must be a VllmEngine/);
    expect(() => vllmMetricsText({} as never)).toThrow(/^engine must be a VllmEngine/);
  });
});

describe('a vLLM request checks its trace line', () => {
  it('refuses an empty prompt, too few hash ids, bad ids and impossible lengths, naming the request and the field', () => {
    const t = (inputLength: number, outputLength: number, ids: number[]) => ({ inputLength, outputLength, hashIds: Int32Array.from(ids) });
    expect(() => new VllmRequest(3, t(0, 5, []))).toThrow(/trace request 3: inputLength/);
    expect(() => new VllmRequest(3, t(1030, 5, [1, 2]))).toThrow(/trace request 3: hashIds must hold 3 ids/);
    expect(() => new VllmRequest(3, { inputLength: 10, outputLength: 1, hashIds: [1.5] as never })).toThrow(/trace request 3: hashIds\[0\]/);
    expect(() => new VllmRequest(3, t(10, 2 ** 28, [1]))).toThrow(/trace request 3: outputLength/);
    expect(() => new VllmRequest(-1, t(10, 1, [1]))).toThrow(/request index/);
    expect(new VllmRequest(3, t(10, 0, [1])).maxOutputs).toBe(1);
  });

  it('a KV-cache manager refuses token counts that are not positive integers, and changes nothing', () => {
    const kv = new ModelVllmKv(16, 16);
    const wasm = new VllmKvCacheManager({ numBlocks: 16, blockSize: 16 });
    const r = new VllmRequest(0, req([1], 20, 1));
    wasm.computedBlocks(r);
    for (const n of [0, -3, 1.5, Number.NaN]) expect(() => wasm.allocateSlots(r, n, 0, false)).toThrow(/numNewTokens must be an integer >= 1/);
    expect(() => wasm.allocateSlots(r, 4, -1, false)).toThrow(/hitBlocks/);
    expect(wasm.figures()).toMatchObject({ allocatedBlocks: 0, allocateCalls: 0 });
    expect(kv.numFreeBlocks()).toBe(wasm.numFreeBlocks());
    wasm.dispose();
  });

  it('a KV-cache manager refuses what is not a request, hits it did not find and tokens past the request, and counts nothing nor makes a slot', () => {
    const wasm = new VllmKvCacheManager({ numBlocks: 16, blockSize: 16 });
    const r = new VllmRequest(0, req([1], 20, 1));
    for (const bad of [null, {}, { kvSlot: 0 }]) {
      expect(() => wasm.computedBlocks(bad as never)).toThrow(/^req must be a VllmRequest, got /);
      expect(() => wasm.allocateSlots(bad as never, 1, 0, false)).toThrow(/^req must be a VllmRequest, got /);
      expect(() => wasm.free(bad as never)).toThrow(/^req must be a VllmRequest, got /);
      expect(() => wasm.release(bad as never)).toThrow(/^req must be a VllmRequest, got /);
    }
    // A request never looked up: hits are refused, and so are more tokens than it has (20 + 1, 2 blocks).
    expect(() => wasm.allocateSlots(r, 4, 1, false)).toThrow(/with 1 hit blocks, but its last lookup found -1/);
    expect(() => wasm.allocateSlots(r, 33, 0, false)).toThrow(/33 new tokens after 0 is not within its 21 tokens/);
    expect(() => wasm.allocateSlots(r, 4, 0, 'no' as never)).toThrow(new TypeError('fullSequenceMustFit must be a boolean, got "no"'));
    expect(wasm.figures()).toMatchObject({ allocatedBlocks: 0, allocateCalls: 0 });
    expect(wasm.numRequests).toBe(0);
    expect(() => wasm.recordEvents(1 as never)).toThrow(new TypeError('on must be a boolean, got 1'));
    expect(() => new VllmKvCacheManager({ numBlocks: 16, blockSize: 16, sharedChecksum: 5 as never })).toThrow(new TypeError('options.sharedChecksum must be an object, got 5'));
    expect(() => new VllmKvCacheManager({ numBlocks: 16, blockSize: 16, sharedChecksum: { h: -1 } })).toThrow(/^options\.sharedChecksum\.h must be in \[0, 4294967295\], got -1$/);
    // Looked up, it still refuses more hits than the lookup found, then takes the right call.
    expect(wasm.computedBlocks(r)).toBe(0);
    expect(() => wasm.allocateSlots(r, 4, 1, false)).toThrow(/with 1 hit blocks, but its last lookup found 0/);
    expect(wasm.figures().allocateCalls).toBe(0);
    expect(wasm.allocateSlots(r, 20, 0, false)).toBe(true);
    expect(wasm.figures()).toMatchObject({ allocatedBlocks: 2, allocateCalls: 1 });
    wasm.check();
    wasm.dispose();
  });
});
