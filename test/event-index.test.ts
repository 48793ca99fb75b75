// KVEventIndex against the engines it follows: after every step of random
// runs of several engines (dp ranks, salts, evictions, resets, host tiers),
// each index holds exactly each engine's cache, block for block, and answers
// every prefix query as the engine's own match would. Four indexes follow:
// one fed the event objects, one fed the wire bytes (each engine in its own
// form, read by the test's reader of vLLM's format), and two that join late,
// one from a snapshot and one from a replay of every batch published.
// Unit tests of the index's API follow.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { drainVllmEventBatches, encodeVllmEventBatches, type VllmEncodeOptions } from '../bindings/events/vllm.js';
import type { CoreManager } from '../bindings/managers/core-manager.js';
import { GPU_SOURCE, type BlockStoredEvent, type KVEvent } from '../bindings/managers/kv-events.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { saltKey } from '../bindings/pool/salt.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { replayWithEventHook } from '../bindings/replay/replay-events.js';
import type { ReplayOptions } from '../bindings/replay/replay.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { TRACE_PATH } from './support/externals.js';
import { soak, soaking } from './support/soak.js';
import { readBatch } from './support/vllm-wire.js';
import { collidingHashes, fingerprint, payload, refusedCases, storedMap } from './support/hostile-batches.js';


interface EngineSpec {
  numBlocks: number;
  dpSize: number;
  host: number; // host blocks per rank, 0: none
  wire: VllmEncodeOptions;
}

type Op =
  | { kind: 'new'; engine: number; prompt: number; len: number; salt: boolean }
  | { kind: 'allocate'; pick: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'publish'; pick: number }
  | { kind: 'finish'; pick: number; computed: boolean }
  | { kind: 'reset'; engine: number }
  | { kind: 'offload'; engine: number; ok: boolean }
  | { kind: 'prefetch'; pick: number; delivered: number }
  | { kind: 'join'; how: 'snapshot' | 'replay' }
  | { kind: 'hostile'; pick: number; at: number; value: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 9, arbitrary: fc.record({ kind: fc.constant('new' as const), engine: fc.nat(), prompt: fc.nat({ max: 5 }), len: fc.integer({ min: 2, max: 18 }), salt: fc.boolean() }) },
  { weight: 15, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('publish' as const), pick: fc.nat() }) },
  { weight: 15, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), computed: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const), engine: fc.nat() }) },
  { weight: 9, arbitrary: fc.record({ kind: fc.constant('offload' as const), engine: fc.nat(), ok: fc.boolean() }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('prefetch' as const), pick: fc.nat(), delivered: fc.nat({ max: 6 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('join' as const), how: fc.constantFrom('snapshot' as const, 'replay' as const) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('hostile' as const), pick: fc.nat(), at: fc.nat(), value: fc.nat(255) }) },
);

const engineArb: fc.Arbitrary<EngineSpec> = fc.record({
  numBlocks: fc.integer({ min: 4, max: 16 }),
  dpSize: fc.integer({ min: 1, max: 2 }),
  host: fc.oneof(fc.constant(0), fc.integer({ min: 2, max: 12 })),
  wire: fc.record({ format: fc.constantFrom('map' as const, 'positional' as const), blockHashes: fc.constantFrom('uint64' as const, 'bytes' as const) }),
});

/** Prompts that share prefixes (the first 5 tokens by parity) and diverge after. */
const tokensOf = (p: number, len: number) => Array.from({ length: len }, (_, i) => (i < 5 ? (p % 2) * 1000 + i : p * 100 + i));
const hexOf = (h: Uint8Array) => Buffer.from(h).toString('hex');
const low64 = (h: Uint8Array) => new DataView(h.buffer, h.byteOffset, 16).getBigUint64(0, true);

interface Engine {
  name: string;
  spec: EngineSpec;
  pool: BlockManagerPool;
  seqs: Sequence[];
  /** Every batch published so far (what a replay from sequence 0 returns). */
  published: Uint8Array[];
}

/** The managers of engine `e`: per rank, its device manager and (host tier) its host manager. */
function managers(e: Engine): Array<Array<[string, CoreManager]>> {
  const hosts = e.pool instanceof HierarchyBlockManagerPool ? e.pool.hosts : null;
  return e.pool.managers.map((m, r) => {
    const list: Array<[string, CoreManager]> = [['GPU', m as unknown as CoreManager]];
    if (hosts) list.push(['CPU', hosts[r]!]);
    return list;
  });
}

/** What an index keyed from `e`'s stream (objects: uint64; wire: its form) holds for a cached hash. */
function indexed(h: Uint8Array, wire: VllmEncodeOptions | null): bigint | string {
  return wire?.blockHashes === 'bytes' ? hexOf(Uint8Array.from(h).reverse()) : low64(h);
}

function checkIndex(idx: KVEventIndex, engines: readonly Engine[], fromWire: boolean, prompts: ReadonlyArray<[number[], string]>): void {
  for (const e of engines) {
    managers(e).forEach((list, r) => {
      for (const [medium, m] of list) {
        // Exactly the engine's cache.
        const real = new Set([...m.lruOrder()].map((id) => indexed(m.blockHash(id)!, fromWire ? e.spec.wire : null)));
        expect(new Set(idx.blocks(e.name, r, medium).map((b) => b.hash))).toEqual(real);
        // Every query answered as the engine's own match (from block 0, stopping at the first miss).
        for (const [tokens, salt] of prompts) {
          const nFull = Math.floor(tokens.length / e.pool.blockSize);
          const want = m.peekMatches(tokens, nFull, salt === '' ? null : saltKey(salt, e.pool.seed));
          const got = idx.match(tokens, { salt, media: [medium] }).find((x) => x.instance === e.name && x.dpRank === r)?.blocks ?? 0;
          expect(got).toBe(want);
        }
      }
    });
  }
}

/** What the runs exercised (checked after the property, so that it cannot pass by testing nothing). */
const seen = { stored: 0, cpu: 0, fetched: 0, salted: 0, cleared: 0, evicted: 0, lateChecks: 0, hostileRefused: 0, hostileApplied: 0 };

const HOSTILE = refusedCases(2);

/**
 * A hostile peer's batch to the wire index, beside the engines' streams: a
 * refusal the issue reported, a real batch with a byte changed, a flood of
 * crafted hashes, or the peer going away. Refused: a typed error and the
 * index exactly as before; applied: it lands on the peer's own sources (the
 * engines' are checked after the step as always).
 */
function hostile(idx: KVEventIndex, op: Extract<Op, { kind: 'hostile' }>, published: readonly Uint8Array[]): void {
  const peer = `peer-${op.pick % 2}`;
  const kind = op.pick % 4;
  if (kind === 3) {
    idx.removeInstance(peer);
    return;
  }
  let batch: Uint8Array | Record<string, unknown>;
  let mustRefuse = false;
  if (kind === 0) {
    batch = HOSTILE[op.at % HOSTILE.length]!.batch;
    mustRefuse = true;
  } else if (kind === 1 && published.length > 0) {
    batch = published[op.at % published.length]!.slice();
    batch[op.value % batch.length] = op.at & 255;
  } else batch = payload([storedMap(collidingHashes(50 + (op.at % 200)), 2)]);
  const before = fingerprint(idx);
  try {
    idx.applyBatch(peer, batch as never);
    expect(mustRefuse).toBe(false);
    seen.hostileApplied++;
  } catch (e) {
    expect(e instanceof TypeError || e instanceof RangeError, String(e)).toBe(true);
    expect(fingerprint(idx)).toBe(before);
    seen.hostileRefused++;
  }
}

function run(specs: EngineSpec[], ops: Op[]): void {
  const engines: Engine[] = specs.map((spec, i) => {
    const base = { numBlocks: spec.numBlocks, blockSize: 2, dpSize: spec.dpSize };
    const pool = spec.host > 0 ? new HierarchyBlockManagerPool({ ...base, hostNumBlocks: spec.host, enableKvcacheStore: true }) : new BlockManagerPool(base);
    pool.recordEvents(true, { snapshots: true });
    return { name: `engine-${i}`, spec, pool, seqs: [], published: [] };
  });
  const live = new KVEventIndex();
  const wire = new KVEventIndex({ blockSize: 2 });
  const late: KVEventIndex[] = [];
  const lateWire: KVEventIndex[] = [];
  const prompts = new Map<string, [number[], string]>();
  const all = () => engines.flatMap((e) => e.seqs.map((s) => [s, e] as const));
  try {
    for (const op of ops) {
      if (op.kind === 'new') {
        const e = engines[op.engine % engines.length]!;
        const t = tokensOf(op.prompt, op.len);
        const salt = op.salt ? 'tenant' : '';
        e.seqs.push(new Sequence(t, { cacheSalt: salt }));
        prompts.set(JSON.stringify([t, salt]), [t, salt]);
      } else if (op.kind === 'reset' || op.kind === 'offload') {
        const e = engines[op.engine % engines.length]!;
        if (op.kind === 'reset') e.pool.resetPrefixCache();
        else if (e.pool instanceof HierarchyBlockManagerPool) {
          for (const t of e.pool.takeTransfers()) if (t.offload) e.pool.completeOffload(t.offload, op.ok);
        }
      } else if (op.kind === 'hostile') {
        hostile(wire, op, engines.flatMap((e) => e.published));
      } else if (op.kind === 'join') {
        if (op.how === 'snapshot') {
          // A router that starts now: the snapshot, then what follows.
          const idx = new KVEventIndex();
          for (const e of engines) idx.apply(e.name, e.pool.snapshotEvents());
          late.push(idx);
        } else {
          // A router that starts now and asks each engine to replay from sequence 0.
          const idx = new KVEventIndex();
          for (const e of engines) for (const b of e.published) idx.applyBatch(e.name, readBatch(b));
          lateWire.push(idx);
        }
      } else {
        const list = all();
        if (list.length === 0) continue;
        const [s, e] = list[op.pick % list.length]!;
        if (op.kind === 'allocate') {
          if (e.pool.allocate(s)) s.kvCachedTokens = s.numTokens;
        } else if (op.kind === 'decode') {
          if (s.dpRank < 0) continue;
          for (let i = 0; i < op.steps; i++) {
            s.appendToken(7000 + s.numTokens);
            if (!e.pool.allocate(s, s.numTokens)) break;
            s.kvCachedTokens = s.numTokens - 1;
          }
        } else if (op.kind === 'prefetch') {
          // The KV-cache store path: blocks fetched into the host tier (a new sequence only).
          if (!(e.pool instanceof HierarchyBlockManagerPool) || s.dpRank >= 0) continue;
          if (e.pool.prefetchFromStorage(s) !== null) seen.fetched += e.pool.updatePrefetchResult(s, op.delivered);
        } else if (op.kind === 'publish') {
          // Caches what the sequence computed while it runs (a duplicate of a cached block stays the sequence's).
          if (s.dpRank >= 0) e.pool.cache(s);
        } else {
          if (s.dpRank >= 0 && op.computed) s.kvCachedTokens = s.numTokens;
          else if (s.dpRank >= 0) s.kvCachedTokens = Math.min(s.kvCachedTokens, s.numTokens - 1);
          e.pool.deallocate(s);
          e.seqs.splice(e.seqs.indexOf(s), 1);
        }
      }
      // Publish this step's events: objects to one index, bytes to the other.
      for (const e of engines) {
        e.pool.check();
        const events: KVEvent[] = e.pool.drainEvents();
        for (const ev of events) {
          if (ev.medium === 'CPU') seen.cpu++;
          if (ev.type === 'stored' && ev.salt !== null) seen.salted++;
          if (ev.type === 'cleared') seen.cleared++;
          if (ev.type === 'removed') seen.evicted++;
          if (ev.type === 'stored') seen.stored++;
        }
        live.apply(e.name, events);
        for (const idx of late) idx.apply(e.name, events);
        for (const b of encodeVllmEventBatches(events, { ...e.spec.wire, ts: 1 })) {
          e.published.push(b.payload);
          const read = readBatch(b.payload);
          wire.applyBatch(e.name, read);
          for (const idx of lateWire) idx.applyBatch(e.name, read);
        }
      }
      const queries = [...prompts.values()];
      checkIndex(live, engines, false, queries);
      seen.lateChecks += late.length + lateWire.length;
      checkIndex(wire, engines, true, queries);
      for (const idx of late) checkIndex(idx, engines, false, queries);
      for (const idx of lateWire) checkIndex(idx, engines, true, queries);
    }
  } finally {
    for (const e of engines) e.pool.dispose();
  }
}

describe('KVEventIndex follows engines exactly', () => {
  it('after every step of random runs: each index holds each cache and answers every query as the engine matches', () => {
    fc.assert(fc.property(fc.array(engineArb, { minLength: 1, maxLength: 3 }), fc.array(opArb, { minLength: 20, maxLength: soaking ? 300 : 120, size: 'max' }), run), {
      numRuns: soak(30),
    });
    // The runs reached host-tier blocks, salts, clears, evictions and late joins. (A pool caches a chain
    // from its first unshared block, so a block waiting for its parent needs a manager: see below.)
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

describe('KVEventIndex', () => {
  const B = 2;
  const pool = (dpSize = 1) => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, dpSize });
    p.recordEvents(true);
    return p;
  };
  const cache = (p: BlockManagerPool, tokens: number[], salt = '') => {
    const s = new Sequence(tokens, { cacheSalt: salt });
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = s.numTokens;
    p.deallocate(s);
  };

  it('answers the longest prefix per instance and per source', () => {
    const a = pool();
    const b = pool(2);
    const idx = new KVEventIndex();
    cache(a, [1, 2, 3, 4, 5, 6]);
    cache(b, [1, 2, 3, 4, 9, 9]);
    cache(b, [1, 2, 8, 8]); // rank 1 of b (more free blocks)
    idx.apply('a', a.drainEvents());
    idx.apply('b', b.drainEvents());
    expect(idx.blockSize).toBe(B);
    expect(Object.fromEntries(idx.longestPrefix([1, 2, 3, 4, 5, 6, 7]))).toEqual({ a: 3, b: 2 });
    expect(idx.match([1, 2, 3, 4, 5, 6])).toEqual([
      { instance: 'a', dpRank: 0, medium: 'GPU', blocks: 3 },
      { instance: 'b', dpRank: 0, medium: 'GPU', blocks: 2 },
      { instance: 'b', dpRank: 1, medium: 'GPU', blocks: 1 },
    ]);
    expect(idx.longestPrefix([5, 6])).toEqual(new Map());
    expect(idx.longestPrefix([1, 2, 3, 4], { salt: 'x' })).toEqual(new Map()); // a salt is another chain
    expect(idx.longestPrefix([1, 2, 3, 4], { media: ['CPU'] })).toEqual(new Map());
    idx.removeInstance('a');
    expect(Object.fromEntries(idx.longestPrefix([1, 2, 3, 4, 5, 6]))).toEqual({ b: 2 });
    expect(idx.sourcesInfo().map((s) => [s.instance, s.dpRank, s.blocks])).toEqual([['b', 0, 3], ['b', 1, 2]]);
    a.dispose();
    b.dispose();
  });

  it('counts the copies of a block with countCopies (vLLM announces each copy of a key); without, an event applied twice changes nothing', () => {
    const a = pool();
    cache(a, [1, 2, 3, 4]);
    const stored = a.drainEvents();
    expect(stored.map((e) => e.type)).toEqual(['stored', 'stored']);
    const second = stored[1]! as BlockStoredEvent;
    const removed = { type: 'removed' as const, dpRank: 0, blockId: second.blockId, hash: second.hash, medium: 'GPU', group: second.group };
    // The second block stored again (a copy on another block), then one copy evicted.
    const events = [...stored, { ...second, blockId: 9 }, removed];
    const counting = new KVEventIndex({ countCopies: true });
    const plain = new KVEventIndex();
    expect([counting.countCopies, plain.countCopies]).toEqual([true, false]);
    counting.apply('a', events);
    plain.apply('a', events);
    expect(counting.longestPrefix([1, 2, 3, 4, 5])).toEqual(new Map([['a', 2]]));
    expect(plain.longestPrefix([1, 2, 3, 4, 5])).toEqual(new Map([['a', 1]]));
    // The same through the wire: one batch.
    const wire = new KVEventIndex({ countCopies: true });
    for (const b of encodeVllmEventBatches(events, { ts: 1 })) wire.applyBatch('a', b.payload);
    expect(wire.longestPrefix([1, 2, 3, 4, 5])).toEqual(new Map([['a', 2]]));
    // The last copy leaves: the key goes.
    counting.apply('a', [removed]);
    expect(counting.longestPrefix([1, 2, 3, 4, 5])).toEqual(new Map([['a', 1]]));
    expect(counting.stats().blocks).toBe(1);
    // Without counting, applying a stored event twice (a snapshot overlapping the events after it) holds one copy.
    const twice = new KVEventIndex();
    twice.apply('a', [...stored, ...stored, removed]);
    expect(twice.longestPrefix([1, 2, 3, 4, 5])).toEqual(new Map([['a', 1]]));
    expect(() => new KVEventIndex({ countCopies: 1 as never })).toThrow(/options.countCopies must be a boolean/);
    a.dispose();
  });

  it('keeps a block whose parent left the cache first, and reaches it once the parent is back', () => {
    // A pool always caches a chain from its first block not shared, so only a
    // manager used directly (or a host tier) caches a child whose parent is gone.
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    m.recordEvents(true);
    const idx = new KVEventIndex();
    const follow = () => idx.apply('m', m.drainEvents());
    const [a] = m.allocate(1)!;
    m.cache([1, 2], [a!]);
    const [b] = m.allocate(1)!;
    m.cache([1, 2], [b!]); // a duplicate of the cached [1, 2]: stamped, not cached
    m.deallocate([a!]);
    expect(m.evict(1)).toBe(1); // the cached [1, 2] goes; b keeps its duplicate
    const [c] = m.allocate(1)!;
    m.cache([1, 2, 3, 4], [b!, c!], 1); // [3, 4], chained on [1, 2], which is not cached
    follow();
    expect(idx.sourcesInfo()[0]!.waiting).toBe(1);
    expect(idx.longestPrefix([1, 2, 3, 4])).toEqual(new Map()); // the engine's match stops at [1, 2] too
    expect(m.peekMatches([1, 2, 3, 4], 2)).toBe(0);
    const [d] = m.allocate(1)!;
    m.cache([1, 2], [d!]); // [1, 2] is back: [3, 4] is reachable again
    follow();
    expect(idx.sourcesInfo()[0]!.waiting).toBe(0);
    expect(idx.longestPrefix([1, 2, 3, 4]).get('m')).toBe(2);
    expect(m.peekMatches([1, 2, 3, 4], 2)).toBe(2);
    m.dispose();
  });

  it('checks what it is given and leaves the index as it was', () => {
    const idx = new KVEventIndex({ blockSize: 2 });
    expect(() => new KVEventIndex({ blockSize: 0 })).toThrow(/options.blockSize must be in \[1, 4096\], got 0/);
    expect(() => new KVEventIndex({ size: 2 } as never)).toThrow(/unknown option "size"/);
    expect(() => idx.apply('', [])).toThrow(/instance must be a non-empty string/);
    expect(() => idx.apply('a', [{ type: 'foo', dpRank: 0 } as never])).toThrow(/type must be "stored", "removed" or "cleared"/);
    const m = pool();
    cache(m, [1, 2, 3]);
    const p4 = new BlockManagerPool({ numBlocks: 8, blockSize: 4 });
    p4.recordEvents(true);
    cache(p4, [1, 2, 3, 4]);
    const ok = m.drainEvents();
    expect(() => idx.apply('b', [...ok, ...p4.drainEvents()])).toThrow(/the index's blocks hold 2 tokens, but events\[\d+\] stores a block of 4/);
    expect(idx.sourcesInfo()).toEqual([]); // nothing applied
    // The same refusal from a wire batch and from a manager's raw records.
    cache(p4, [5, 6, 7, 8]);
    const [batch] = encodeVllmEventBatches(p4.drainEvents());
    expect(() => idx.applyBatch('b', batch!.payload)).toThrow(/^KVEventIndex.applyBatch\("b"\), the batch of ts [0-9.]+: events\[0\].block_size is 4, but the index's blocks hold 2 tokens$/);
    const m4 = new BlockManagerImpl({ numBlocks: 8, blockSize: 4 });
    m4.recordEvents(true);
    m4.cache([1, 2, 3, 4], m4.allocate(1)!);
    let refused = 0;
    m4.drainEventRecords(GPU_SOURCE, (src, rt, ptr, len) => {
      expect(() => idx.applyRecords('c', 0, src, rt, ptr, len, null)).toThrow(/^the index's blocks hold 2 tokens, but a BlockStored event has block_size 4$/);
      refused++;
    });
    expect(refused).toBe(1);
    expect(idx.sourcesInfo()).toEqual([]);
    m4.dispose();
    p4.dispose();
    idx.apply('a', ok);
    expect(() => idx.longestPrefix([1, 2.5])).toThrow(/tokens\[1\] must be an int32 token id, got 2\.5/);
    expect(() => idx.longestPrefix([1, 2], { media: 'GPU' as never })).toThrow(/query.media must be an array of strings/);
    expect(() => idx.applyBatch('a', new Uint8Array([1, 2, 3]))).toThrow(/not a vLLM KV event batch/);
    expect(idx.longestPrefix([1, 2, 3]).get('a')).toBe(1);
    m.dispose();
    p4.dispose();
  });
});

// ---- replays: the index against the pool at every step ----

/** Replays `options` with events; after every `every`-th step, an index fed the wire batches holds exactly each rank's caches. */
function followReplay(options: ReplayOptions, wire: VllmEncodeOptions, every: number): number {
  const idx = new KVEventIndex();
  let checks = 0;
  replayWithEventHook(options, (pool, step) => {
    for (const b of drainVllmEventBatches(pool, { ...wire, ts: step })) idx.applyBatch('replay', readBatch(b.payload));
    if (step % every !== 0) return;
    const engine = { name: 'replay', spec: { numBlocks: 0, dpSize: pool.dpSize, host: 0, wire }, pool, seqs: [], published: [] };
    checkIndex(idx, [engine], true, []);
    checks++;
  });
  return checks;
}

describe('KVEventIndex follows a replay', () => {
  it('the built-in workload, plain and with a host tier: the index holds the caches after every step', () => {
    const base = { requests: 150, numBlocks: 200, blockSize: 4, maxRunning: 4, dpSize: 2 };
    expect(followReplay(base, { format: 'positional' }, 1)).toBeGreaterThan(100);
    expect(followReplay({ ...base, hostBlocks: 150 }, { blockHashes: 'bytes' }, 1)).toBeGreaterThan(100);
  });

  // The whole trace when soaking (CI); its first 300 requests on a smaller cache otherwise.
  it(`the Mooncake conversation trace${soaking ? '' : ', first 300 requests'}, with a host tier: the index holds the caches every 50 steps`, async () => {
    const trace = await readTraceFile(TRACE_PATH);
    const o = soaking ? { trace, numBlocks: 4096, hostBlocks: 8192 } : { trace: trace.slice(0, 300), numBlocks: 1024, hostBlocks: 2048 };
    expect(followReplay(o, {}, soaking ? 50 : 10)).toBeGreaterThan(soaking ? 200 : 20);
  });
});
