// Differential property test of LinearStatePrefixCache: random acquire /
// release / match / unpin / contains / reserve / commit / abort / batch
// sequences on the Wasm core and on the model must agree step by step (slots
// returned, free stack, slot states, pins, LRU order, counters), with
// check() after every step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  LinearStatePrefixCache, type LinearStatePin, type LinearStateReservation, type ResolvedLinearStateOps,
} from '../bindings/linear-state/linear-state-prefix-cache.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelLinearStateCache, type ModelBatch, type ModelLinearSeq } from '../model/linear-state-prefix-cache.js';
import { agree } from './support/agree.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

type BatchOp = { restore: number | null; save: number | null; seq: number | null };
type Op =
  | { kind: 'acquire'; chunked: boolean }
  | { kind: 'release'; pick: number }
  | { kind: 'match'; h: number }
  | { kind: 'unpin'; pick: number }
  | { kind: 'contains'; h: number }
  | { kind: 'reserve'; h: number }
  | { kind: 'commit'; pick: number }
  | { kind: 'abort'; pick: number }
  | { kind: 'batch'; ops: BatchOp[]; withSeqs: boolean }
  | { kind: 'settle'; pick: number; commit: boolean };

const H = 7; // few hashes, so hits, duplicates and coalescing are common
const hashArb = fc.nat({ max: H - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('acquire' as const), chunked: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('match' as const), h: hashArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('unpin' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('contains' as const), h: hashArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('reserve' as const), h: hashArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('commit' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort' as const), pick: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('batch' as const),
      ops: fc.array(
        fc.record({ restore: fc.option(hashArb), save: fc.option(hashArb), seq: fc.option(fc.nat({ max: 7 })) }),
        { minLength: 1, maxLength: 5 },
      ),
      withSeqs: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('settle' as const), pick: fc.nat(), commit: fc.boolean() }) },
);

function hashBytes(n: number): Uint8Array {
  const a = new Uint8Array(16);
  a[0] = n;
  a[9] = 0x5a;
  return a;
}
const hashKey = (n: number) => `h${n}`;

function compare(c: LinearStatePrefixCache, m: ModelLinearStateCache): void {
  c.check();
  agree(Array.from(c.slots.freeIds()), m.free, 'free slots');
  const states: unknown[] = [];
  const expected: unknown[] = [];
  for (let s = 1; s < m.numSlots; s++) {
    states.push(c.slotState(s), m.state[s] === 'committed' ? c.slots.refCount(s) - 1 : null);
    expected.push(m.state[s], m.state[s] === 'committed' ? m.pins[s] : null);
  }
  agree(states, expected, 'slot states and pins');
  agree(Array.from(c.lruOrder()), m.lruOrder(), 'LRU');
  const st = c.stats();
  agree({
    matchCalls: st.matchCalls,
    matchHits: st.matchHits,
    checkpointsCommitted: st.checkpointsCommitted,
    checkpointsEvicted: st.checkpointsEvicted,
  }, m.counters, 'counters');
}

/** `jump`: at op `at`, the cache's recency clock moves to `to` (the core's test hook), so that its u32 stamps run out and are renumbered. */
function run(ops: Op[], numSlots: number, jump?: { at: number; to: number }): void {
  const c = new LinearStatePrefixCache({ numSlots });
  const m = new ModelLinearStateCache(numSlots);
  // Live slots the test holds, as sequences (core and model twins).
  const seqs: { core: Sequence; model: ModelLinearSeq }[] = [];
  const pins: { core: LinearStatePin; slot: number }[] = [];
  const reservations: { core: LinearStateReservation; slot: number }[] = [];
  const batches: { core: ResolvedLinearStateOps; model: ModelBatch }[] = [];
  const takeAt = <T>(a: T[], pick: number): T | undefined => (a.length === 0 ? undefined : a.splice(pick % a.length, 1)[0]);
  try {
    for (const [i, op] of ops.entries()) {
      if (jump !== undefined && i === jump.at) {
        const core = (c as unknown as { slots: { ptr: number; rt: { ex: { mgr_set_clock(m: number, v: number): void } } } }).slots;
        core.rt.ex.mgr_set_clock(core.ptr, jump.to);
        c.check();
      }
      switch (op.kind) {
        case 'acquire': {
          const a = c.acquireLiveSlot();
          const b = m.acquireLive();
          expect(a).toBe(b);
          if (a !== null) {
            const core = new Sequence(new Array(8).fill(1));
            core.state.linearSlot = a;
            core.state.kvCached = op.chunked ? 4 : 0;
            seqs.push({ core, model: { slot: a, kvCached: core.state.kvCached, promptTokens: 8, initialized: false } });
          }
          break;
        }
        case 'release': {
          const s = takeAt(seqs, op.pick);
          if (!s) break;
          c.releaseLiveSlot(s.core.state.linearSlot);
          m.releaseLive(s.model.slot);
          s.core.state.linearSlot = -1;
          s.model.slot = -1;
          break;
        }
        case 'match': {
          const p = c.match(hashBytes(op.h));
          const s = m.match(hashKey(op.h));
          expect(p === null ? 0 : p.slot).toBe(s);
          if (p) pins.push({ core: p, slot: s });
          break;
        }
        case 'unpin': {
          const p = takeAt(pins, op.pick);
          if (!p) break;
          c.unpin(p.core);
          m.unpin(p.slot);
          break;
        }
        case 'contains':
          expect(c.contains(hashBytes(op.h))).toBe(m.contains(hashKey(op.h)));
          break;
        case 'reserve': {
          const r = c.reserveCheckpoint(hashBytes(op.h));
          const s = m.reserve(hashKey(op.h), false);
          expect(r.slot).toBe(s.slot);
          expect(r.reservation !== null).toBe(s.pending);
          if (r.reservation) reservations.push({ core: r.reservation, slot: s.slot });
          break;
        }
        case 'commit':
        case 'abort': {
          const r = takeAt(reservations, op.pick);
          if (!r) break;
          if (op.kind === 'commit') expect(c.commit(r.core)).toBe(m.commit(r.slot));
          else {
            c.abort(r.core);
            m.abort(r.slot);
          }
          break;
        }
        case 'batch': {
          const pick = (i: number | null) => (i === null || seqs.length === 0 ? null : seqs[i % seqs.length]!);
          const chosen = op.ops.map((o) => pick(o.seq));
          const coreOps = op.ops.map((o, i) => ({
            liveSlot: chosen[i]?.core.state.linearSlot ?? -1,
            restoreHash: o.restore === null ? null : hashBytes(o.restore),
            saveHash: o.save === null ? null : hashBytes(o.save),
          }));
          const modelOps = op.ops.map((o, i) => ({
            liveSlot: chosen[i]?.model.slot ?? -1,
            restore: o.restore === null ? null : hashKey(o.restore),
            save: o.save === null ? null : hashKey(o.save),
          }));
          const r = c.resolveCacheOps(coreOps, op.withSeqs ? chosen.map((s) => s?.core ?? null) : undefined);
          const b = m.resolve(modelOps, op.withSeqs ? chosen.map((s) => s?.model ?? null) : undefined);
          expect([...r.restoreSrcSlots]).toEqual(b.restoreSrc);
          expect([...r.saveDstSlots]).toEqual(b.saveDst);
          expect(r.reservations.map((x) => x.slot)).toEqual(b.reservations);
          expect(r.promotions.map((x) => [x.liveSlot, x.replacement])).toEqual(b.promotions.map((x) => [x.live, x.replacement]));
          batches.push({ core: r, model: b });
          break;
        }
        case 'settle': {
          const x = takeAt(batches, op.pick);
          if (!x) break;
          if (op.commit) expect(c.commitReservations(x.core)).toBe(m.commitBatch(x.model));
          else {
            c.abortCacheOps(x.core);
            m.abortBatch(x.model);
          }
          for (const s of seqs) {
            expect(s.core.state.linearSlot).toBe(s.model.slot);
            expect(s.core.state.linearInit).toBe(s.model.initialized);
          }
          break;
        }
      }
      compare(c, m);
    }
    countSteps(ops.length);
  } finally {
    c.dispose();
  }
}

describe('differential: LinearStatePrefixCache core vs model', () => {
  it('agrees on random operation sequences', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 20, maxLength: 400, size: 'max' }), fc.integer({ min: 2, max: 7 }), (ops, n) => run(ops, n)),
      { numRuns: soak(150) },
    );
  });

  it('agrees when the recency stamps run out and are renumbered mid-run', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 20, maxLength: 300, size: 'max' }),
        fc.integer({ min: 3, max: 7 }),
        fc.nat(),
        fc.integer({ min: 1, max: 12 }),
        (ops, n, at, left) => run(ops, n, { at: at % ops.length, to: 0xffffffff - left }),
      ),
      { numRuns: soak(80) },
    );
  });
});
