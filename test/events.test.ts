// KV-cache events: exact streams for known scenarios, off by default, and a
// property test where a simulated router follows the stream of a random
// pool run (every parent it is given is a block it knows; with recording on
// from the start it mirrors the cache exactly) and the events agree with the
// reference model's, block id for block id.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import type { KVEvent } from '../bindings/managers/kv-events.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import type { ModelEvent } from '../model/block-manager-impl.js';
import type { ModelSequence } from '../model/sequence.js';
import { applySequenceOp, type SequenceOp } from './support/sequence-ops.js';

const B = 4;
const T = Array.from({ length: 5 * B }, (_, i) => 100 + i);
const hex = (h: Uint8Array) => Buffer.from(h).toString('hex');
const keyOf = (b: number, tokens = T) => hex(hashBlocks(tokens.slice(0, (b + 1) * B), B).subarray(b * 16, b * 16 + 16));

/** What a cache-aware router keeps per rank: hash -> block id; throws when the stream cannot be followed. */
class Router {
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
      if (e.parentHash !== null && !m.has(hex(e.parentHash))) throw new Error(`parent ${hex(e.parentHash)} unknown`);
      m.set(h, e.blockId);
    } else if (e.type === 'removed') {
      const h = hex(e.hash);
      if (m.get(h) !== e.blockId) throw new Error(`removed ${h} (block ${e.blockId}) was not stored`);
      m.delete(h);
    } else m.clear();
  }
}

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
      { type: 'stored', dpRank: 0, blockId: 1, hash: expect.any(Uint8Array), parentHash: null, tokenIds: Int32Array.from(T.slice(0, 4)) },
      { type: 'stored', dpRank: 0, blockId: 2, hash: expect.any(Uint8Array), parentHash: expect.any(Uint8Array), tokenIds: Int32Array.from(T.slice(4, 8)) },
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

  it('a parent removed before its child, and re-stores, give a stream a router can follow', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    m.recordEvents(true);
    const router = new Router();
    const drain = () => {
      const ev = m.drainEvents();
      ev.forEach((e) => router.apply(e));
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
    // Block 1's chain continued after block 2: its parent (key 0) is gone, so none is named.
    const [c] = m.allocate(1)!;
    m.cache(T.slice(0, 2 * B), [b!, c!], 1);
    expect(drain()).toEqual([['stored', c, keyOf(1), null]]);
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
    expect(router.ranks.get(0)!.size).toBe(0);
    m.check();
    m.dispose();
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

  it('started late, never names or removes a block announced before', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    const ids = m.allocate(1)!;
    m.cache(T.slice(0, B), ids); // cached before recording
    m.recordEvents(true);
    const more = m.allocate(1)!;
    m.cache(T.slice(0, 2 * B), [ids[0]!, more[0]!], 1);
    const ev = m.drainEvents();
    expect(ev.map((e) => [e.type, (e as { parentHash: unknown }).parentHash])).toEqual([['stored', null]]);
    m.deallocate([ids[0]!, more[0]!]);
    expect(m.evict(2)).toBe(2); // LRU: block 1 (cached first) is older... both go
    expect(m.drainEvents().map((e) => [e.type, (e as { blockId: number }).blockId])).toEqual([['removed', more[0]]]);
    expect(() => m.recordEvents(1 as unknown as boolean)).toThrow(/on must be a boolean, got 1/);
    m.dispose();
  });
});

// ---- property: a router follows the stream; core and model events agree ----

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

/** The model's events in the core's terms: ids, parents as block ids (via the model router), tokens. */
function sameEvents(core: KVEvent[], model: ModelEvent[], rank: number, coreIds: Map<string, number>, modelIds: Map<string, number>): void {
  expect(core.map((e) => e.type)).toEqual(model.map((e) => e.type));
  core.forEach((e, i) => {
    const m = model[i]!;
    if (e.type === 'cleared') {
      coreIds.clear();
      modelIds.clear();
      return;
    }
    expect(e.dpRank).toBe(rank);
    expect(e.blockId).toBe((m as { blockId: number }).blockId);
    if (e.type === 'stored' && m.type === 'stored') {
      expect([...e.tokenIds]).toEqual(m.tokenIds);
      const cp = e.parentHash ? coreIds.get(hex(e.parentHash)) : null;
      const mp = m.parentKey !== null ? modelIds.get(m.parentKey) : null;
      expect(cp).toBe(mp);
      coreIds.set(hex(e.hash), e.blockId);
      modelIds.set(m.key, m.blockId);
    } else if (e.type === 'removed' && m.type === 'removed') {
      coreIds.delete(hex(e.hash));
      modelIds.delete(m.key);
    }
  });
}

function follow(ops: Op[], numBlocks: number, blockSize: number, dpSize: number): void {
  const opts = { numBlocks, blockSize, dpSize };
  const pool = new BlockManagerPool(opts);
  const model = new ModelBlockManagerPool(opts);
  pool.recordEvents(true);
  model.recordEvents(true);
  let on = true;
  let gap = false; // recording was off for a while: the router's view may lag behind the cache
  let router = new Router();
  const ids = Array.from({ length: dpSize }, () => [new Map<string, number>(), new Map<string, number>()] as const);
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
        pool.recordEvents(on);
        model.recordEvents(on);
        if (on) {
          // A consumer that saw a gap starts over.
          gap = true;
          router = new Router();
          for (const [c, m] of ids) {
            c.clear();
            m.clear();
          }
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
      }
    }
  } finally {
    pool.dispose();
  }
}

describe('event stream property', () => {
  it('a router follows every run, mirrors the cache, and core and model events agree', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }),
        fc.integer({ min: 3, max: 24 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 2 }),
        follow,
      ),
      { numRuns: 200 },
    );
  });
});
