// An oracle for the replay kernel that does not share its loop.
//
// 1. Hand-derived traces: small multi-request traces whose ids, hits,
//    evictions and checksums are worked out below from the replay rules (the
//    derivation is in the comments), checked against the library's replay
//    and against the model's own replay loop (model/replay.ts).
// 2. Random traces in every mode: the library's replay and the model's loop
//    over the model pools must give the same result object.
// 3. The Mooncake conversation trace in every mode, library against model:
//    its first requests on a small cache by default; in CI
//    (KVPOOL_FULL_REPLAY=1, set by .ci/run) the whole trace where the model
//    is fast enough (see CI_LIMIT), on the replay's default sizes.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { replaySync, type ReplayOptions, type TraceRequest } from '../bindings/index.js';
import { modelReplay, type ModelReplayOptions, type ModelReplayResult } from '../model/replay.js';
import { agree } from './support/agree.js';
import { figures } from './support/replay-figures.js';
import { haveTrace, TRACE_PATH } from './support/externals.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

const req = (hashIds: number[], inputLength: number, outputLength: number): TraceRequest => ({
  inputLength, outputLength, hashIds: Int32Array.from(hashIds),
});

/** The replay's id checksum over ids popped in this order: h = (h * 31 + id) mod 2^32 from h = 0. */
function checksum(ids: number[]): number {
  let h = 0;
  for (const id of ids) h = (h * 31 + id) % 2 ** 32;
  return h;
}

/** The library's figures (no timings, configuration echo, per-rank counters or warnings). */
function core(trace: TraceRequest[], o: ReplayOptions): Record<string, unknown> {
  return figures(replaySync({ trace, ...o }));
}

/** The model loop's result for the same options (the library's `eviction` is the model's `evictionPolicy`). */
function model(trace: TraceRequest[], o: ReplayOptions): ModelReplayResult {
  const { eviction, ...rest } = o;
  return modelReplay(trace, { ...(rest as ModelReplayOptions), ...(eviction !== undefined && { evictionPolicy: eviction }) });
}

// Every hand trace uses blocks of 512 tokens, so block j of a prompt is
// exactly its chunk hash_ids[j], and 6 blocks per rank: padding 0 plus ids
// 1..5. A fresh free stack hands out 1, 2, 3, 4, 5; a freed id is pushed on
// top and comes back first. K(a, b, ...) names the chain key of a block whose
// prompt so far is chunks a, b, .... "LRU [x, y]" lists cached ids least
// recent first.
const B = 512;
const N = 6;

describe('replay oracle: hand-derived traces', () => {
  // Trace 1, one running sequence (W = 1), so each request first finishes the
  // one before it. It reaches a partial hit, the exact-prompt rule, a
  // duplicate insert, eviction of a chain's tail, a rejection and a
  // truncated decode.
  //
  // r0 [10, 11], L 1024, O 1. No hit. Prefill needs 2 blocks: pops 1, 2.
  //    Decode token 0 makes 1025 tokens, 3 blocks: pops 3. Table [1, 2, 3].
  // r1 [10, 12], L 1024, O 1. Finish r0: computed 1024 tokens = 2 full
  //    blocks, K(10) on 1 and K(10,11) on 2, both new; the batch is
  //    re-appended in reverse visiting order: LRU [2, 1]. Release 1, 2 (stay
  //    cached), 3 (free: stack top 3).
  //    Prefill: K(10) hits 1, K(10,12) misses: 1 shared block (matched 1).
  //    One more block: pops 3. Decode: pops 4. Table [1, 3, 4]; free [5].
  // r2 [10, 12], L 1024, O 1, r1's prompt again. Finish r1: from its shared
  //    block on, K(10,12) on 3 is new: LRU [2, 1, 3]. Release 1 (cached), 3
  //    (cached), 4 (free: stack [5, 4]).
  //    Prefill: K(10) hits 1, K(10,12) hits 3: the whole prompt, so the last
  //    hit (3) is given back and stays cached; the match refreshes 3 then 1:
  //    LRU [2, 3, 1]. Matched 1. One more block: pops 4 (2 free, no
  //    eviction). Decode: pops 5. Table [1, 4, 5]; free [].
  // r3 [20, 21, 22], L 1536, O 0. Finish r2: from its shared block on,
  //    K(10,12) is cached already (on 3): refreshed, LRU [2, 1, 3]; its own
  //    block 4 is not cached. Release 1 (cached), 4 and 5 (free: [4, 5]).
  //    Prefill: no hit; 3 blocks, 2 free: evict 1 from the least recent end:
  //    2 (K(10,11), the tail of r0's chain). Free [4, 5, 2]: pops 2, 5, 4.
  //    Evicted 1. LRU [1, 3].
  // r4 [40..45], L 3000, O 0: 6 blocks, more than the 5 there are. Finish
  //    r3: K(20), K(20,21), K(20,21,22) on 2, 5, 4, all new: LRU
  //    [1, 3, 4, 5, 2]; all stay cached; free []. Prefill: no hit; needs 6,
  //    0 free: the walk evicts all 5 (they stay evicted) and still fails.
  //    Nothing runs: rejected. Evicted 6 in all. Free [1, 3, 4, 5, 2].
  // r5 [10, 11], L 1024, O 1600. Nothing cached: no hit. Prefill pops 2, 5.
  //    Decode pops 4 at 1025 tokens, 3 at 1537, 1 at 2049; at 2561 tokens a
  //    6th block is needed, nothing is free or cached, nothing else runs:
  //    truncated. End: finish r5, computed 2560 tokens = 5 full blocks, all
  //    new: 5 cached, 0 free.
  //
  // Prompt blocks 2 + 2 + 2 + 3 + 2 = 11 (r4 rejected), matched 0 + 1 + 1 +
  // 0 + 0 = 2, hit rate 2 / 11 = 0.181818.
  const trace1 = [
    req([10, 11], 1024, 1),
    req([10, 12], 1024, 1),
    req([10, 12], 1024, 1),
    req([20, 21, 22], 1536, 0),
    req([40, 41, 42, 43, 44, 45], 3000, 0),
    req([10, 11], 1024, 1600),
  ];
  const popped1 = [1, 2, 3, 3, 4, 4, 5, 2, 5, 4, 2, 5, 4, 3, 1];
  const expected1 = {
    requests: 6, rejected: 1, truncated: 1, promptBlocks: 11, matchedBlocks: 2, hitRate: 0.181818, evictedBlocks: 6,
    allocatedBlocks: popped1.length, idChecksum: checksum(popped1), freeBlocksAtEnd: 0, cachedBlocksAtEnd: 5,
  };

  it('trace 1 (one running sequence): hits, exact prompt, tail eviction, rejection, truncation', () => {
    expect(expected1.idChecksum).toBe(3916899426);
    expect(core(trace1, { numBlocks: N, blockSize: B, maxRunning: 1 })).toEqual(expected1);
    expect(model(trace1, { numBlocks: N, blockSize: B, maxRunning: 1 })).toEqual(expected1);
  });

  // Trace 2, two running sequences (W = 2), publishing after prefill: cached
  // blocks that running sequences hold are skipped by eviction, and a block
  // the exact-prompt rule gives back is evicted by the same allocation.
  //
  // r0 [10, 11], L 1024, O 1. Prefill pops 1, 2; decode pops 3. Publish
  //    after that first decode step: K(10) on 1, K(10,11) on 2: LRU [2, 1].
  //    Free [5, 4].
  // r1 [10, 11, 13], L 1100, O 0 (2 full blocks + 76 tokens). Prefill: both
  //    full blocks hit (1, 2), not the whole prompt: matched 2. One more
  //    block: pops 4. Free [5].
  // r2 [20, 21, 22], L 1536, O 0. Two running: finish r0 (its blocks are
  //    cached already: refreshed; release 1, 2 (held by r1), 3 (free: [5, 3])).
  //    Prefill: no hit, 3 blocks, 2 free: evict 1, but 2 and 1 are held by
  //    r1: nothing evicted, it fails. Finish r1 (its 2 full blocks are its
  //    shared ones: nothing inserted; release 1, 2 (cached), 4 (free:
  //    [5, 3, 4])). Retry: pops 4, 3, 5.
  // r3 [10, 11], L 1024, O 0. Prefill: 1 and 2 hit, the whole prompt: 2 is
  //    given back (cached, unheld); LRU [2, 1]. Matched 1. One more block, 0
  //    free: evict 1 from the least recent end: 2 itself, which comes back
  //    at once: pops 2. Evicted 1.
  // End: finish r2 (3 new entries) and r3 (K(10,11) on 2, new again):
  //    5 cached, 0 free.
  //
  // Prompt blocks 2 + 2 + 3 + 2 = 9, matched 0 + 2 + 0 + 1 = 3, hit rate 1/3.
  const trace2 = [req([10, 11], 1024, 1), req([10, 11, 13], 1100, 0), req([20, 21, 22], 1536, 0), req([10, 11], 1024, 0)];
  const popped2 = [1, 2, 3, 4, 4, 3, 5, 2];
  const expected2 = {
    requests: 4, rejected: 0, truncated: 0, promptBlocks: 9, matchedBlocks: 3, hitRate: 0.333333, evictedBlocks: 1,
    allocatedBlocks: popped2.length, idChecksum: checksum(popped2), freeBlocksAtEnd: 0, cachedBlocksAtEnd: 5,
  };

  it('trace 2 (two running, publish after prefill): held blocks are skipped, a given-back block is evicted at once', () => {
    const o = { numBlocks: N, blockSize: B, maxRunning: 2, publishAfterPrefill: true };
    expect(expected2.idChecksum).toBe(3607521438);
    expect(core(trace2, o)).toEqual(expected2);
    expect(model(trace2, o)).toEqual(expected2);
  });

  // Trace 3, one running sequence, where the policies disagree on a victim.
  //
  // r0 [10], L 512, O 0. Pops 1.
  // r1 [20], L 512, O 600. Finish r0: K(10) on 1 (prompt: priority 35).
  //    Prefill pops 2; decode pops 3 at 513 tokens and 4 at 1025. Free [5].
  // r2 [30, 31, 32], L 1536, O 0. Finish r1: computed 1111 tokens = 2 full
  //    blocks: K(20) on 2 (prompt: 35) and the block of tokens 512..1023 on
  //    3 (generated tokens: priority 10 under 'priority'); release 4 (free
  //    [5, 4]). Recency, least first: [1, 3, 2] (the new batch re-appended
  //    in reverse). Prefill: 3 blocks, 2 free, evict 1:
  //    - 'lru': the least recent, 1. Free [5, 4, 1]: pops 1, 4, 5.
  //    - 'lfu': every entry has one visit (its insert): the least recent, 1.
  //    - 'priority': the lowest priority, 3. Free [5, 4, 3]: pops 3, 4, 5.
  // End: finish r2, 3 new entries: 5 cached, 0 free.
  const trace3 = [req([10], 512, 0), req([20], 512, 600), req([30, 31, 32], 1536, 0)];
  const expected3 = (popped: number[]) => ({
    requests: 3, rejected: 0, truncated: 0, promptBlocks: 5, matchedBlocks: 0, hitRate: 0, evictedBlocks: 1,
    allocatedBlocks: popped.length, idChecksum: checksum(popped), freeBlocksAtEnd: 0, cachedBlocksAtEnd: 5,
  });

  it('trace 3: LRU and LFU evict the oldest prompt block, priority the generated block', () => {
    const o = { numBlocks: N, blockSize: B, maxRunning: 1 };
    for (const [policy, popped] of [['lru', [1, 2, 3, 4, 1, 4, 5]], ['lfu', [1, 2, 3, 4, 1, 4, 5]], ['priority', [1, 2, 3, 4, 3, 4, 5]]] as const) {
      expect(core(trace3, { ...o, eviction: policy }), policy).toEqual(expected3([...popped]));
      expect(model(trace3, { ...o, eviction: policy }), policy).toEqual(expected3([...popped]));
    }
  });
});

// ---- random traces, every mode ----

/** The modes of `kvpool replay`, as library options and as model options. */
const MODES: Array<[string, ReplayOptions]> = [
  ['lru', {}],
  ['lru, publish after prefill', { publishAfterPrefill: true }],
  ['lfu', { eviction: 'lfu' }],
  ['priority', { eviction: 'priority' }],
  ['linear state', { linearStateSlots: 6 }],
  ['sliding window', { slidingWindow: 40, compressRatios: [1, 2] }],
  ['host tier', { hostBlocks: 40 }],
  // Modes combined: each part as above, on one pool.
  ['host tier, lfu, 2 ranks', { hostBlocks: 40, eviction: 'lfu', dpSize: 2 }],
  ['host tier, priority', { hostBlocks: 40, eviction: 'priority' }],
  ['host tier with linear state', { hostBlocks: 40, linearStateSlots: 6 }],
  ['host tier with a KV-cache store', { hostBlocks: 24, storeBlocks: 60 }],
  ['host tier with a KV-cache store and linear state', { hostBlocks: 24, storeBlocks: 60, linearStateSlots: 6 }],
  ['sliding window with linear state', { slidingWindow: 40, compressRatios: [1, 2], linearStateSlots: 6 }],
];

/**
 * Small traces: 1-4 chunks per prompt from a small alphabet of chunk ids, so
 * prompts share prefixes; lengths cut into the last chunk, so partial blocks
 * and exact prompts both occur; decodes long enough to cross blocks.
 */
const traceArb = fc.array(
  fc.record({ ids: fc.array(fc.nat({ max: 5 }), { minLength: 1, maxLength: 4 }), cut: fc.nat({ max: 512 }), out: fc.nat({ max: 200 }) }),
  { minLength: 1, maxLength: 60, size: 'max' },
);

function toTrace(rows: Array<{ ids: number[]; cut: number; out: number }>): TraceRequest[] {
  return rows.map(({ ids, cut, out }) => req(ids, (ids.length - 1) * 512 + Math.max(1, cut), out));
}

/** What the random runs reached, per mode (a mode whose runs never evict, reject or hit proves little). */
const reached = new Map<string, Record<string, number>>();

function note(name: string, r: Record<string, unknown>): void {
  const t = reached.get(name) ?? {};
  const add = (k: string, v: unknown) => (t[k] = (t[k] ?? 0) + (typeof v === 'number' ? v : 0));
  for (const k of ['rejected', 'truncated', 'matchedBlocks', 'evictedBlocks']) add(k, r[k]);
  const ls = r['linearState'] as Record<string, number> | undefined;
  if (ls) for (const k of ['checkpointHits', 'checkpointEvictions', 'trimmedBlocks']) add(k, ls[k]);
  const host = r['hostTier'] as Record<string, number> | undefined;
  if (host) for (const k of ['blocksLoaded', 'blocksOffloaded']) add(k, host[k]);
  const store = (host as { store?: Record<string, number> } | undefined)?.store;
  if (store) for (const k of ['blocksDelivered', 'blocksEvicted']) add(`store.${k}`, store[k]);
  const subs = r['subManagers'] as Array<Record<string, number>> | undefined;
  if (subs) add('releasedBlocks', subs[0]!['releasedBlocks']);
  reached.set(name, t);
}

describe('replay oracle: random traces, library against the model loop', () => {
  for (const [name, mode] of MODES) {
    it(`agrees in mode: ${name}`, () => {
      fc.assert(
        fc.property(
          traceArb,
          fc.constantFrom(16, 32, 64),
          fc.integer({ min: 24, max: 400 }),
          fc.integer({ min: 1, max: 4 }),
          (rows, blockSize, numBlocks, maxRunning) => {
            const trace = toTrace(rows);
            const o = { blockSize, numBlocks, maxRunning, ...mode };
            const r = core(trace, o);
            agree(r, model(trace, o), name);
            note(name, r);
            countSteps(trace.length);
          },
        ),
        { numRuns: soak(60) },
      );
      // A composite pool has no prefix cache: no hits, no evictions, no checkpoint restores.
      const mustReach = mode.slidingWindow !== undefined
        ? ['rejected', 'truncated', 'releasedBlocks', ...(mode.linearStateSlots !== undefined ? ['checkpointEvictions'] : [])]
        : Object.keys(reached.get(name)!);
      for (const k of mustReach) expect(reached.get(name)![k], `${name}: ${k}`).toBeGreaterThan(0);
    });
  }
});

// ---- the Mooncake trace: a prefix by default, the whole trace in CI ----

const full = process.env['KVPOOL_FULL_REPLAY'] === '1';

/**
 * Requests of the trace each mode replays in CI: all of them, except where
 * the model's eviction is too slow for the whole trace -- it scans the LRU
 * from its least recent end on every eviction, skipping what it cannot take
 * (held blocks, and under LFU and priority every entry of a higher key), and
 * with 65536 cached blocks and ~9 M evictions that is hours. Those replay a
 * prefix that already evicts heavily. The combined modes replay 2000
 * requests (~70-90 s each for 5000 in the model alone), LFU with a host
 * tier on 2 ranks 400 (its model scans two 65536-block LRUs and the host's:
 * 14 s for 400, 46 s for 600, 14 min for 1000): each still evicts hundreds
 * of thousands of blocks and loads from the host, and the CI stays near a
 * quarter hour.
 */
const CI_LIMIT: Record<string, number | undefined> = {
  'lru, publish after prefill': 3000,
  lfu: 1000,
  priority: 1000,
  'host tier, lfu, 2 ranks': 400,
  'host tier, priority': 1000,
  'host tier with linear state': 2000,
  'host tier with a KV-cache store': 2000,
  'host tier with a KV-cache store and linear state': 2000,
  'sliding window with linear state': 2000,
};

/** Outside CI: the first requests only, on a cache small enough that they evict (so that every test also runs in a user's `npx vitest run`). */
const QUICK_REQUESTS = 100;

describe.runIf(haveTrace)(`replay oracle: the Mooncake conversation trace in every mode (${full ? 'CI' : `the first ${QUICK_REQUESTS} requests; CI: more`})`, () => {
  let loaded: Promise<TraceRequest[]> | null = null;
  const load = () => (loaded ??= import('../bindings/node/trace-file.js').then((m) => m.readTraceFile(TRACE_PATH)));
  for (const [name, mode] of MODES) {
    const limit = full ? CI_LIMIT[name] : QUICK_REQUESTS;
    // CI: the replay's defaults (65536 blocks); quick: 1/64 of every size.
    const scale = full ? 1 : 64;
    it(`agrees in mode: ${name} (${limit === undefined ? 'the whole trace' : `the first ${limit} requests`}${full ? '' : `, ${65536 / scale} blocks`})`, { timeout: 1_800_000 }, async () => {
      const trace = (await load()).slice(0, limit);
      // The replay's defaults: 16-token blocks, 65536 blocks, 32 running; a
      // host tier twice the device, a window of 4096 tokens with full
      // sub-managers of ratios 1 and 4, 202 checkpoint slots.
      const o = {
        blockSize: 16, numBlocks: 65536 / scale, maxRunning: 32, ...mode,
        ...(mode.hostBlocks && { hostBlocks: 131072 / scale }),
        ...(mode.storeBlocks && { hostBlocks: 16384 / scale, storeBlocks: 262144 / scale }),
        ...(mode.slidingWindow && { slidingWindow: 4096, compressRatios: [1, 4] }),
        ...(mode.linearStateSlots && { linearStateSlots: 202 }),
      };
      const r = core(trace, o);
      agree(r, model(trace, o), name);
      if (!mode.slidingWindow) expect(r['evictedBlocks'], 'the replay evicts').toBeGreaterThan(1000);
      countSteps(trace.length);
    });
  }
});
