// KV-cache events: exact streams for known scenarios (vLLM's parent rule:
// a stored block names the chain's previous block, null only for block 0;
// a salted block 0 names its salt), snapshots, off by default, and a
// property test where the events of a random pool run agree with the
// reference model's, block id for block id, and name only blocks that were
// announced (see event-index.test.ts for an index that follows them).

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import type { KVEvent } from '../bindings/managers/kv-events.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import type { ModelEvent } from '../model/block-manager-impl.js';
import type { ModelSequence } from '../model/sequence.js';
import { applySequenceOp, type SequenceOp } from './support/sequence-ops.js';
import { fewer } from './support/soak.js';

const B = 4;
const T = Array.from({ length: 5 * B }, (_, i) => 100 + i);
const hex = (h: Uint8Array) => Buffer.from(h).toString('hex');
const keyOf = (b: number, tokens = T) => hex(hashBlocks(tokens.slice(0, (b + 1) * B), B).subarray(b * 16, b * 16 + 16));

/** What a consumer was told per rank: hash -> block id. Throws on a removal of a block never announced, or a block stored twice. */
class Announced {
  readonly ranks = new Map<number, Map<string, number>>();
  private rank(r: number): Map<string, number> {
    let m = this.ranks.get(r);
    if (!m) this.ranks.set(r, (m = new Map()));
    return m;
  }
  apply(e: KVEvent): void {
    const m = this.rank(e.dpRank);
    if (e.type === 'stored') {
      const h = hex(e.hash);
      if (m.has(h)) throw new Error(`stored ${h} twice`);
      m.set(h, e.blockId);
    } else if (e.type === 'removed') {
      const h = hex(e.hash);
      if (m.get(h) !== e.blockId) throw new Error(`removed ${h} (block ${e.blockId}) was not stored`);
      m.delete(h);
    } else m.clear();
  }
}

const GPU = { medium: 'GPU', group: { index: 0, kind: 'full_attention', slidingWindow: null } };

describe('KV-cache events', () => {
  it('are off by default and cost nothing to drain', () => {
    const p = new BlockManagerPool({ numBlocks: 8, blockSize: B });
    const s = new Sequence(T.slice(0, 9));
    p.allocate(s);
    s.kvCachedTokens = 9;
    p.deallocate(s);
    expect(p.numBlocksInPrefixCache()).toEqual([2]);
    expect(p.drainEvents()).toEqual([]);
    p.dispose();
  });

  it('record stores with hash, parent, tokens, id and rank, then evictions, in order', () => {
    const p = new BlockManagerPool({ numBlocks: 5, blockSize: B });
    p.recordEvents(true);
    const s = new Sequence(T.slice(0, 9)); // 2 full blocks + 1 token: ids 1, 2, 3
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = 9;
    p.deallocate(s);
    const ev = p.drainEvents();
    expect(ev).toEqual([
      { type: 'stored', dpRank: 0, blockId: 1, hash: expect.any(Uint8Array), parentHash: null, tokenIds: Int32Array.from(T.slice(0, 4)), salt: null, ...GPU },
      { type: 'stored', dpRank: 0, blockId: 2, hash: expect.any(Uint8Array), parentHash: expect.any(Uint8Array), tokenIds: Int32Array.from(T.slice(4, 8)), salt: null, ...GPU },
    ]);
    const [e0, e1] = ev as Array<Extract<KVEvent, { type: 'stored' }>>;
    expect(hex(e0!.hash)).toBe(keyOf(0));
    expect(hex(e1!.hash)).toBe(keyOf(1));
    expect(hex(e1!.parentHash!)).toBe(keyOf(0));
    expect(p.drainEvents()).toEqual([]); // drained
    // 4 usable blocks, 2 cached: a 4-block sequence evicts both, the tail first.
    const t = new Sequence(Array.from({ length: 16 }, (_, i) => 900 + i));
    expect(p.allocate(t)).toBe(true);
    expect(p.drainEvents().map((e) => [e.type, (e as { blockId: number }).blockId])).toEqual([['removed', 2], ['removed', 1]]);
    p.deallocate(t); // its tokens' KV was never computed: nothing cached
    expect(p.drainEvents()).toEqual([]);
    p.dispose();
  });

  it('a child names its parent even when the parent left the cache first, as vLLM does', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    m.recordEvents(true);
    const told = new Announced();
    const drain = () => {
      const ev = m.drainEvents();
      ev.forEach((e) => told.apply(e));
      return ev.map((e) => (e.type === 'cleared' ? ['cleared'] : [e.type, e.blockId, hex(e.hash), e.type === 'stored' && e.parentHash ? hex(e.parentHash) : null]));
    };
    const [a] = m.allocate(1)!; // 1
    m.cache(T.slice(0, B), [a!]);
    const [b] = m.allocate(1)!; // 2: a duplicate of block 0, stamped, not cached
    m.cache(T.slice(0, B), [b!]);
    expect(drain()).toEqual([['stored', 1, keyOf(0), null]]);
    m.deallocate([a!]);
    expect(m.evict(1)).toBe(1); // the parent goes while block 2 (same key) is held
    expect(drain()).toEqual([['removed', 1, keyOf(0), null]]);
    // Block 1's chain continued after block 2: its parent (key 0) is gone, still it is named.
    const [c] = m.allocate(1)!;
    m.cache(T.slice(0, 2 * B), [b!, c!], 1);
    expect(drain()).toEqual([['stored', c, keyOf(1), keyOf(0)]]);
    // Key 0 re-stored under block 2's duplicate, then a child names it.
    const [d] = m.allocate(1)!;
    m.cache(T.slice(0, B), [d!]);
    const [e, f] = m.allocate(2)!;
    m.cache(T.slice(0, 3 * B), [d!, c!, e!], 0); // key 1 is cached already: only key 2 is new
    m.deallocate([e!]);
    m.cache(Array.from({ length: 2 * B }, (_, i) => 7 + i), [f!]);
    expect(drain()).toEqual([
      ['stored', d, keyOf(0), null],
      ['stored', e, keyOf(2), keyOf(1)],
      ['stored', f, keyOf(0, Array.from({ length: 2 * B }, (_, i) => 7 + i)), null],
    ]);
    m.deallocate([b!, c!, d!, f!]);
    expect(m.resetPrefixCache()).toBe(4);
    expect(drain()).toEqual([['cleared']]);
    expect(told.ranks.get(0)!.size).toBe(0);
    m.check();
    m.dispose();
  });

  it('a salted sequence announces block 0 with its salt and no parent, the next blocks chained on it', () => {
    const p = new BlockManagerPool({ numBlocks: 8, blockSize: B });
    p.recordEvents(true);
    const s = new Sequence(T.slice(0, 9), { cacheSalt: 'tenant-a' });
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = 9;
    p.deallocate(s);
    const [e0, e1] = p.drainEvents() as Array<Extract<KVEvent, { type: 'stored' }>>;
    expect([e0!.salt, e0!.parentHash, e1!.salt, hex(e1!.parentHash!)]).toEqual(['tenant-a', null, null, hex(e0!.hash)]);
    // The same tokens unsalted are other blocks, announced with no salt.
    const u = new Sequence(T.slice(0, 5));
    expect(p.allocate(u)).toBe(true);
    u.kvCachedTokens = 5;
    p.deallocate(u);
    const [f0] = p.drainEvents() as Array<Extract<KVEvent, { type: 'stored' }>>;
    expect([f0!.salt, f0!.parentHash, hex(f0!.hash)]).toEqual([null, null, keyOf(0)]);
    expect(hex(f0!.hash)).not.toBe(hex(e0!.hash));
    // A second salt: each block 0 is named with its own.
    const t = new Sequence(T.slice(0, 5), { cacheSalt: 'tenant-b' });
    expect(p.allocate(t)).toBe(true);
    t.kvCachedTokens = 5;
    p.deallocate(t);
    const a = new Sequence(T.slice(0, 5), { cacheSalt: 'tenant-a' });
    expect(p.allocate(a)).toBe(true); // a hit on tenant-a's block 0: nothing stored
    const b2 = new Sequence(T.slice(4, 9), { cacheSalt: 'tenant-a' });
    expect(p.allocate(b2)).toBe(true);
    b2.kvCachedTokens = 5;
    p.deallocate(b2);
    p.deallocate(a);
    expect((p.drainEvents() as Array<Extract<KVEvent, { type: 'stored' }>>).map((e) => e.salt)).toEqual(['tenant-b', 'tenant-a']);
    p.dispose();
  });

  it('a reset that leaves held blocks cached records removals, not a clear', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    m.recordEvents(true);
    const ids = m.allocate(2)!;
    m.cache(T.slice(0, 2 * B), ids);
    m.deallocate([ids[1]!]);
    m.drainEvents();
    expect(m.resetPrefixCache()).toBe(1);
    expect(m.drainEvents().map((e) => e.type)).toEqual(['removed']);
    m.dispose();
  });

  it('started late, names an unannounced parent but never removes or snapshots a block it did not announce', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    const ids = m.allocate(1)!;
    m.cache(T.slice(0, B), ids); // cached before recording
    m.recordEvents(true, { snapshots: true });
    const more = m.allocate(1)!;
    m.cache(T.slice(0, 2 * B), [ids[0]!, more[0]!], 1);
    const ev = m.drainEvents();
    expect(ev.map((e) => [e.type, hex((e as { parentHash: Uint8Array }).parentHash)])).toEqual([['stored', keyOf(0)]]);
    expect(m.snapshotEvents().map((e) => (e as { blockId: number }).blockId)).toEqual([more[0]]);
    m.deallocate([ids[0]!, more[0]!]);
    expect(m.evict(2)).toBe(2); // LRU: block 1 (cached first) is older... both go
    expect(m.drainEvents().map((e) => [e.type, (e as { blockId: number }).blockId])).toEqual([['removed', more[0]]]);
    expect(() => m.recordEvents(1 as unknown as boolean)).toThrow(/on must be a boolean, got 1/);
    m.dispose();
  });

  it('snapshots are kept only when asked for (they cost memory): without, recording refuses to take one', () => {
    const p = new BlockManagerPool({ numBlocks: 8, blockSize: B });
    expect(() => p.snapshotEvents()).toThrow(/snapshots need recording with them/);
    p.recordEvents(true);
    const s = new Sequence(T.slice(0, 9));
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = 9;
    p.deallocate(s);
    expect(p.drainEvents().map((e) => e.type)).toEqual(['stored', 'stored']);
    expect(() => p.snapshotEvents()).toThrow(/snapshots need recording with them: recordEvents\(true, \{ snapshots: true \}\)/);
    expect(() => p.recordEvents(true, { snapshots: true })).toThrow(/recorded without snapshots already; stop recording to change that/);
    p.recordEvents(true); // no options: recording goes on as it is
    expect(() => p.recordEvents(true, { snap: true } as never)).toThrow(/unknown option "snap"/);
    expect(() => p.recordEvents(true, { snapshots: 1 } as never)).toThrow(/options.snapshots must be a boolean, got 1/);
    p.recordEvents(false);
    p.recordEvents(true, { snapshots: true }); // restarted: announces from now on
    expect(p.snapshotEvents()).toEqual([]);
    p.dispose();
  });

  it('a snapshot announces the cache again, parents first, and leaves pending events pending', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: B, dpSize: 2 });
    p.recordEvents(true, { snapshots: true });
    const a = new Sequence(T.slice(0, 13), { cacheSalt: 's' }); // 3 full blocks
    const b = new Sequence([...T.slice(0, 8), 1, 2, 3, 4, 5]); // shares 2 blocks with nothing (no salt)
    for (const s of [a, b]) {
      expect(p.allocate(s)).toBe(true);
      s.kvCachedTokens = s.numTokens;
    }
    p.deallocate(a);
    const live = p.drainEvents();
    p.deallocate(b);
    const pending = p.drainEvents.bind(p);
    const snap = p.snapshotEvents();
    // The cache holds a's 3 blocks (rank 0) and b's 3 (rank 1): every one announced, each after its parent.
    expect(snap.map((e) => [e.type, e.dpRank]).sort()).toEqual([...Array(3).fill(['stored', 0]), ...Array(3).fill(['stored', 1])].sort());
    const seen = new Set<string>();
    for (const e of snap as Array<Extract<KVEvent, { type: 'stored' }>>) {
      if (e.parentHash !== null) expect(seen.has(`${e.dpRank}:${hex(e.parentHash)}`)).toBe(true);
      seen.add(`${e.dpRank}:${hex(e.hash)}`);
    }
    // The salt goes with block 0 of a, as in the live stream.
    expect(snap.filter((e) => (e as { salt: string | null }).salt === 's')).toHaveLength(1);
    expect(live.filter((e) => (e as { salt: string | null }).salt === 's')).toHaveLength(1);
    expect(p.snapshotEvents(1).every((e) => e.dpRank === 1)).toBe(true);
    expect(() => p.snapshotEvents(2)).toThrow(/dpRank must be <= 1, got 2|dpRank/);
    // b's deallocation is still pending: a snapshot drains nothing.
    expect(pending().filter((e) => e.type === 'stored')).toHaveLength(3);
    p.dispose();
  });
});

// ---- property: core and model events agree; removals and snapshots name announced blocks ----

type Op =
  | { kind: 'new'; prompt: number; len: number; salt: boolean }
  | SequenceOp
  | { kind: 'reset' }
  | { kind: 'toggle' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('new' as const), prompt: fc.nat({ max: 5 }), len: fc.nat({ max: 18 }), salt: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tryAllocate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('publish' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('toggle' as const) }) },
);

const tokensOf = (p: number, len: number) => Array.from({ length: len }, (_, i) => (i < 5 ? (p % 2) * 1000 + i : p * 100 + i));

/**
 * The model's events in the core's terms: ids, tokens, salts, and parents
 * through `pairs`, the core hash <-> model key of every block either side
 * ever announced (a parent never announced must be unknown on both sides).
 */
function sameEvents(core: KVEvent[], model: ModelEvent[], rank: number, pairs: Map<string, string>, keys: Set<string>): void {
  expect(core.map((e) => e.type)).toEqual(model.map((e) => e.type));
  core.forEach((e, i) => {
    const m = model[i]!;
    if (e.type === 'cleared') return;
    expect(e.dpRank).toBe(rank);
    expect(e.blockId).toBe((m as { blockId: number }).blockId);
    if (e.type === 'stored' && m.type === 'stored') {
      expect([...e.tokenIds]).toEqual(m.tokenIds);
      expect(e.salt).toBe(m.salt);
      expect(e.parentHash === null).toBe(m.parentKey === null);
      if (e.parentHash !== null) {
        const mapped = pairs.get(hex(e.parentHash));
        if (mapped !== undefined) expect(mapped).toBe(m.parentKey);
        else expect(keys.has(m.parentKey!)).toBe(false);
      }
      pairs.set(hex(e.hash), m.key);
      keys.add(m.key);
    }
  });
}

function follow(ops: Op[], numBlocks: number, blockSize: number, dpSize: number): void {
  const opts = { numBlocks, blockSize, dpSize };
  const pool = new BlockManagerPool(opts);
  const model = new ModelBlockManagerPool(opts);
  pool.recordEvents(true, { snapshots: true });
  model.recordEvents(true);
  let on = true;
  let gap = false; // recording was off for a while: the router's view may lag behind the cache
  let router = new Announced();
  const ids = Array.from({ length: dpSize }, () => [new Map<string, string>(), new Set<string>()] as const);
  const seqs: Array<[Sequence, ModelSequence]> = [];
  try {
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = tokensOf(op.prompt, op.len);
        const salt = op.salt ? 'x' : '';
        seqs.push([new Sequence(t, { cacheSalt: salt }), model.newSequence(t, salt)]);
      } else if (op.kind === 'reset') {
        expect(pool.resetPrefixCache()).toEqual(model.resetPrefixCache());
      } else if (op.kind === 'toggle') {
        on = !on;
        pool.recordEvents(on, { snapshots: true });
        model.recordEvents(on);
        if (on) {
          // A consumer that saw a gap starts over.
          gap = true;
          router = new Announced();
        }
      } else if (seqs.length > 0) {
        const forked = applySequenceOp(pool, model, seqs[op.pick % seqs.length]!, op, blockSize);
        if (forked) seqs.push(forked);
      }
      pool.check();
      const events = pool.drainEvents();
      events.forEach((e) => router.apply(e));
      for (let r = 0; r < dpSize; r++) {
        sameEvents(events.filter((e) => e.dpRank === r), model.managers[r]!.drainEvents(), r, ids[r]![0], ids[r]![1]);
        // The router's picture of the rank against the cache itself.
        const mgr = pool.managers[r]!;
        const cached = new Map([...mgr.lruOrder()].map((id) => [hex(mgr.blockHash(id)!), id]));
        const seen = router.ranks.get(r) ?? new Map<string, number>();
        // While recording is off the router hears nothing; after a gap it
        // knows a subset of the cache (blocks cached meanwhile stay unannounced).
        if (!on) continue;
        if (!gap) expect(seen).toEqual(cached);
        else for (const [h, id] of seen) expect(cached.get(h)).toBe(id);
        // A snapshot is what the consumer was told, and still cached.
        expect(new Map(pool.snapshotEvents(r).map((e) => [hex((e as { hash: Uint8Array }).hash), (e as { blockId: number }).blockId]))).toEqual(seen);
      }
    }
  } finally {
    pool.dispose();
  }
}

describe('recording on a manager', () => {
  it('keeps its snapshot option until stopped: the same options or none go on, other options are refused by name', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    m.recordEvents(true, { snapshots: true });
    m.recordEvents(true); // no options: as it is
    m.recordEvents(true, { snapshots: true }); // the same options
    expect(() => m.recordEvents(true, { snapshots: false })).toThrow(/^kvpool: events are recorded with snapshots already; stop recording to change that/);
    expect(m.snapshotEvents()).toEqual([]); // still with snapshots
    const ids = m.allocate(2)!;
    m.cache(T.slice(0, 2 * B), ids);
    // Stopping checks the options, then ignores them (one call can toggle with the same options).
    expect(() => m.recordEvents(false, { snapshots: 'no' } as never)).toThrow(/options.snapshots must be a boolean/);
    expect(m.recordingEvents).toBe(true);
    m.recordEvents(false, { snapshots: true });
    expect(m.recordingEvents).toBe(false);
    // Stopped, a snapshot still announces what was announced and is cached.
    expect(m.snapshotEvents().map((e) => (e as { blockId: number }).blockId)).toEqual([...ids]);
    m.deallocate(ids);
    m.recordEvents(true, { snapshots: false });
    expect(() => m.snapshotEvents()).toThrow(/^kvpool: snapshots need recording with them/);
    m.recordEvents(false);
    m.recordEvents(true, {}); // no snapshots unless asked for
    expect(() => m.snapshotEvents()).toThrow(/^kvpool: snapshots need recording with them/);
    for (const bad of [null, 5, 'x']) expect(() => m.recordEvents(true, bad as never)).toThrow(new TypeError(`options must be an object, got ${String(bad)}`));
    expect(() => m.recordEvents(true, { snapshots: true })).toThrow(/^kvpool: events are recorded without snapshots already/);
    expect(() => m.drainEvents(0.5)).toThrow(/^dpRank must be an integer/);
    expect(() => m.snapshotEvents(-1)).toThrow(/^dpRank must be/);
    m.dispose();
  });

  // A call that records many removals can grow the core's memory for its
  // event log, which detaches the views every later read goes through. Each
  // call below makes the log outgrow every region freed so far (the stored
  // records of n blocks of one token fill a log of 2^k bytes almost to the
  // brim; the removals double it), so memory grows inside that very call.
  it('allocate, evict and resetPrefixCache that grow memory leave the views current for what is read next', () => {
    const rt = plainCore();
    const fill = 10_082; // 52-byte stored records: 524,264 bytes, just under 512 KiB
    // Each op returns how many blocks it leaves cached.
    const ops: Array<[string, (m: BlockManagerImpl, ids: Int32Array) => number]> = [
      ['allocate', (m, ids) => {
        const got = m.allocate(ids.length)!; // evicts every cached block on the way
        expect(new Set(got).size).toBe(ids.length);
        expect(got.every((id) => id >= 1 && id <= ids.length)).toBe(true);
        m.deallocate(got);
        return 0;
      }],
      ['evict', (m, ids) => (expect(m.evict(ids.length)).toBe(ids.length), 0)],
      ['allocate past numBlocks', (m, ids) => (expect(m.allocate(ids.length + 1)).toBeNull(), 0)],
      ['resetPrefixCache', (m, ids) => {
        m.retain([ids[0]!]); // one block stays cached: removals, not one "cleared" record
        expect(m.resetPrefixCache()).toBe(ids.length - 1);
        m.deallocate([ids[0]!]);
        return 1;
      }],
    ];
    const kept: BlockManagerImpl[] = []; // alive to the end, so no freed log fits the next one
    ops.forEach(([name, op], j) => {
      const n = fill << j;
      const m = new BlockManagerImpl({ numBlocks: n + 1, blockSize: 1 });
      kept.push(m);
      m.recordEvents(true);
      const ids = m.allocate(n)!;
      m.cache(Array.from({ length: n }, (_, i) => i), ids);
      m.deallocate(ids);
      m.stats(); // its output area exists before the call under test
      const before = rt.memory.buffer;
      const left = op(m, ids);
      expect(rt.memory.buffer, `${name} grew memory`).not.toBe(before);
      const s = m.stats();
      expect([s.numBlocksInPrefixCache, s.numFreeBlocks], name).toEqual([left, n - left]);
      const ev = m.drainEvents();
      expect(ev.filter((e) => e.type === 'removed').length, name).toBe(n - left);
    });
    for (const m of kept) m.dispose();
  });
});

describe('event stream property', () => {
  it('core and model events agree; only announced blocks are removed; a snapshot is what was announced', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }),
        fc.integer({ min: 3, max: 24 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 2 }),
        follow,
      ),
      { numRuns: fewer(200) },
    );
  });
});
