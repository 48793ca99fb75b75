// Differential property test of XTensorBlockManagerImpl: random operations
// on the manager and on the model must agree step by step -- ids, null
// results, refusals, map/unmap events, page states and figures -- with
// check() after each step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { XTensorBlockManagerImpl } from '../bindings/managers/xtensor-block-manager-impl.js';
import { ModelXTensor } from '../model/xtensor-block-manager-impl.js';
import { agree } from './support/agree.js';
import { sameRefusal } from './support/same-outcome.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

type Op =
  | { kind: 'allocate'; n: number }
  | { kind: 'free'; pick: number; count: number }
  | { kind: 'retain'; pick: number }
  | { kind: 'reserve'; k: number }
  | { kind: 'freeReserved' }
  | { kind: 'trim' }
  | { kind: 'sleep' }
  | { kind: 'wakeup' }
  | { kind: 'bad'; which: number; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('allocate' as const), n: fc.nat({ max: 8 }) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('free' as const), pick: fc.nat(), count: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('retain' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reserve' as const), k: fc.nat({ max: 5 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'freeReserved' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'trim' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'sleep' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'wakeup' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bad' as const), which: fc.nat({ max: 5 }), pick: fc.nat() }) },
);

const configArb = fc
  .record({
    numBlocks: fc.integer({ min: 2, max: 30 }),
    pageSize: fc.integer({ min: 4, max: 20 }),
    blockFrac: fc.double({ min: 0.05, max: 1, noNaN: true }),
    numLayers: fc.integer({ min: 1, max: 2 }),
    physPages: fc.option(fc.integer({ min: 0, max: 10 }), { nil: undefined }),
    min: fc.nat({ max: 3 }),
    extra: fc.nat({ max: 3 }),
  })
  .map((c) => ({
    numBlocks: c.numBlocks,
    pageSize: c.pageSize,
    blockBytes: Math.max(1, Math.floor(c.pageSize * c.blockFrac)),
    numLayers: c.numLayers,
    numPhysicalPages: c.physPages === undefined ? undefined : (c.physPages + 1) * 2 * c.numLayers,
    minReservedPages: c.min,
    maxReservedPages: c.min + c.extra,
  }));

/** What the runs exercised, so the test fails if the generator stops reaching these paths. */
const seen = { nulls: 0, maps: 0, unmaps: 0, refusals: 0, straddles: 0, reserved: 0, badCalls: 0 };

/** The call's result, or the class of the error it threw (both sides must throw alike). */
function outcome<T>(f: () => T): T | `threw ${string}` {
  try {
    return f();
  } catch (e) {
    return `threw ${(e as Error).constructor.name}`;
  }
}
const threw = (v: unknown): v is `threw ${string}` => typeof v === 'string' && v.startsWith('threw ');

type Config = typeof configArb extends fc.Arbitrary<infer T> ? T : never;

function run(ops: Op[], cfg: Config): void {
  const opts = { ...cfg, blockSize: 4 };
  if (opts.numPhysicalPages === undefined) delete (opts as { numPhysicalPages?: number }).numPhysicalPages;
  const x = new XTensorBlockManagerImpl(opts);
  const m = new ModelXTensor(opts);
  expect(x.pageStates()).toEqual(m.pageStates());
  expect(outcome(() => x.reservePaddingBlocks())).toEqual(outcome(() => m.reservePaddingBlocks()));
  const held: number[] = []; // one entry per reference held
  for (let id = 0; id < opts.numBlocks; id++) if (x.pageOf(id) < 0) seen.straddles++;
  const compare = () => {
    x.check();
    const ev = x.takeEvents();
    for (const e of ev) seen[e.type === 'map' ? 'maps' : 'unmaps']++;
    agree(ev, m.takeEvents(), 'page events');
    agree(x.pageStates(), m.pageStates(), 'page states');
    agree([x.numFreeBlocks(), x.numUsedBlocks()], [m.numFreeBlocks(), m.numUsedBlocks()], 'free, used');
  };
  compare();
  for (const op of ops) {
    switch (op.kind) {
      case 'allocate': {
        const a = outcome(() => x.allocate(op.n));
        const b = outcome(() => m.allocate(op.n));
        agree(threw(a) || a === null ? a : Array.from(a), b);
        if (a === null) seen.nulls++;
        if (threw(a)) seen.refusals++;
        if (!threw(a) && a !== null) held.push(...a);
        break;
      }
      case 'free': {
        const ids = held.splice(op.pick % Math.max(1, held.length), op.count);
        x.deallocate(ids);
        m.deallocate(ids);
        break;
      }
      case 'retain':
        if (held.length > 0) {
          const id = held[op.pick % held.length]!;
          x.retain([id]);
          m.retain([id]);
          held.push(id);
        }
        break;
      case 'reserve':
      {
        const r = outcome(() => x.tryToReserve(op.k));
        agree(r, outcome(() => m.tryToReserve(op.k)));
        if (r === true && op.k > 0) seen.reserved++;
      }
        break;
      case 'freeReserved':
        x.freeReserved();
        m.freeReserved();
        break;
      case 'trim':
        x.trim();
        m.trim();
        break;
      case 'sleep':
        x.sleep();
        m.sleep();
        break;
      case 'wakeup':
        x.wakeup();
        m.wakeup();
        break;
      case 'bad': {
        // Refused alike, nothing changed (compared below).
        const notHeld = [0, opts.numBlocks, ...Array.from({ length: opts.numBlocks }, (_, i) => i).filter((i) => !held.includes(i) && i > 0)];
        const id = notHeld[op.pick % notHeld.length]!;
        const calls: Array<[() => unknown, () => unknown]> = [
          [() => x.allocate(-1), () => m.allocate(-1)],
          [() => x.allocate(2.5), () => m.allocate(2.5)],
          [() => x.tryToReserve(-1), () => m.tryToReserve(-1)],
          [() => x.deallocate([id]), () => m.deallocate([id])],
          [() => x.retain([id]), () => m.retain([id])],
          [() => x.deallocate([...held, held[0] ?? id]), () => m.deallocate([...held, held[0] ?? id])],
        ];
        const [a, b] = calls[op.which]!;
        sameRefusal(a, b);
        seen.badCalls++;
        break;
      }
    }
    compare();
  }
  countSteps(ops.length);
  x.deallocate(held);
  m.deallocate(held);
  x.freeReserved();
  m.freeReserved();
  compare();
  // Only the padding block is left, on page 0.
  expect(x.numUsedBlocks()).toBe(1);
  expect(x.pageStates().allocated).toEqual([0]);
}

describe('XTensor vs reference model', () => {
  it('agrees on random operations', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 20, maxLength: 300, size: 'max' }), configArb, (ops, cfg) => run(ops, cfg)),
      { numRuns: soak(220) },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});
