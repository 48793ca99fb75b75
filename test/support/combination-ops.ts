// The scheduler operations the combination test draws, per row of the table:
// every row gets the pool operations; linear-state rows their cache ops,
// host-tier rows their transfers and the store path, salt rows salted
// sequences mixed with unsalted ones, priority rows the clock and marks.

import fc from 'fast-check';
import type { Row } from './combination-rows.js';

export type Mark = { start: number; end?: number; priority: number; duration?: number };

export type Op =
  | { kind: 'new'; prompt: number; len: number; salt: number; start: boolean }
  | { kind: 'allocate'; pick: number; compute: boolean }
  | { kind: 'allocateList'; picks: number[] }
  | { kind: 'decode'; pick: number; steps: number; own: boolean }
  | { kind: 'compute'; pick: number; cached: number }
  | { kind: 'tryAllocate'; pick: number }
  | { kind: 'allocateShared'; pick: number }
  | { kind: 'publish'; pick: number; upTo: number | undefined }
  | { kind: 'finish'; pick: number; withoutCache: boolean }
  | { kind: 'fork'; pick: number; swap: boolean }
  | { kind: 'adopt'; child: number; source: number; swap: boolean }
  | { kind: 'raw'; tokens: number }
  | { kind: 'unraw'; pick: number }
  | { kind: 'resetCache' }
  | { kind: 'resetTransfers' }
  | { kind: 'bad'; which: number; pick: number }
  // linear state
  | { kind: 'batch'; picks: number[]; ends: number[]; settle: 'commit' | 'abort' | 'later' }
  | { kind: 'settle'; pick: number; commit: boolean }
  | { kind: 'checkpoint'; pick: number; boundary: number }
  | { kind: 'releaseSlot'; pick: number }
  // host tier
  | { kind: 'chunk'; pick: number; tokens: number; copy: number }
  | { kind: 'take' }
  | { kind: 'complete'; pick: number; ok: boolean }
  | { kind: 'flush'; ok: boolean; evict: number }
  | { kind: 'evict'; rank: number; n: number }
  | { kind: 'prefetch'; pick: number }
  | { kind: 'fetched'; pick: number; counts: number[] }
  // priority
  | { kind: 'retain'; pick: number; marks: Mark[] }
  | { kind: 'tick'; dt: number };

export const BAD_CALLS = 11;

const markArb: fc.Arbitrary<Mark> = fc
  .record({
    start: fc.nat({ max: 20 }),
    len: fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined }),
    priority: fc.constantFrom(0, 10, 35, 60, 100),
    duration: fc.option(fc.nat({ max: 4 }), { nil: undefined }),
  })
  .map(({ start, len, priority, duration }) => ({ start, priority, ...(len !== undefined && { end: start + len }), ...(duration !== undefined && { duration }) }));

const pick = fc.nat();
const w = <T>(weight: number, arbitrary: fc.Arbitrary<T>) => ({ weight, arbitrary });

/** The operations of `row`, weighted so that its paths meet (hits, checkpoints, loads) within a few hundred steps. */
export function opArb(row: Row): fc.Arbitrary<Op> {
  const ops: { weight: number; arbitrary: fc.Arbitrary<Op> }[] = [
    w(6, fc.record({ kind: fc.constant('new' as const), prompt: fc.nat({ max: 8 }), len: fc.nat({ max: 20 }), salt: fc.nat({ max: row.salt ? 2 : 0 }), start: fc.boolean() })),
    w(5, fc.record({ kind: fc.constant('allocate' as const), pick, compute: fc.boolean() })),
    w(1, fc.record({ kind: fc.constant('allocateList' as const), picks: fc.array(pick, { minLength: 1, maxLength: 3 }) })),
    w(5, fc.record({ kind: fc.constant('decode' as const), pick, steps: fc.integer({ min: 1, max: 6 }), own: fc.boolean() })),
    w(row.kind === 'composite' ? 3 : 1, fc.record({ kind: fc.constant('compute' as const), pick, cached: fc.nat({ max: 40 }) })),
    w(2, fc.record({ kind: fc.constant('tryAllocate' as const), pick })),
    w(2, fc.record({ kind: fc.constant('allocateShared' as const), pick })),
    w(2, fc.record({ kind: fc.constant('publish' as const), pick, upTo: fc.option(fc.nat(), { nil: undefined }) })),
    w(5, fc.record({ kind: fc.constant('finish' as const), pick, withoutCache: fc.boolean() })),
    w(2, fc.record({ kind: fc.constant('fork' as const), pick, swap: fc.boolean() })),
    w(2, fc.record({ kind: fc.constant('adopt' as const), child: pick, source: pick, swap: fc.boolean() })),
    w(1, fc.record({ kind: fc.constant('raw' as const), tokens: fc.nat({ max: 12 }) })),
    w(1, fc.record({ kind: fc.constant('unraw' as const), pick })),
    w(1, fc.constant({ kind: 'resetCache' as const })),
    w(1, fc.constant({ kind: 'resetTransfers' as const })),
    w(1, fc.record({ kind: fc.constant('bad' as const), which: fc.nat({ max: BAD_CALLS - 1 }), pick })),
  ];
  if (row.linear) {
    ops.push(
      w(5, fc.record({
        kind: fc.constant('batch' as const),
        picks: fc.array(pick, { minLength: 1, maxLength: 3 }),
        ends: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
        settle: fc.constantFrom('commit' as const, 'commit' as const, 'abort' as const, 'later' as const),
      })),
      w(2, fc.record({ kind: fc.constant('settle' as const), pick, commit: fc.boolean() })),
      w(5, fc.record({ kind: fc.constant('checkpoint' as const), pick, boundary: fc.nat({ max: 4 }) })),
      w(1, fc.record({ kind: fc.constant('releaseSlot' as const), pick })),
    );
  }
  if (row.host) {
    ops.push(
      w(2, fc.record({ kind: fc.constant('chunk' as const), pick, tokens: fc.nat({ max: 24 }), copy: fc.nat({ max: 3 }) })),
      w(2, fc.constant({ kind: 'take' as const })),
      w(2, fc.record({ kind: fc.constant('complete' as const), pick, ok: fc.boolean() })),
      w(3, fc.record({ kind: fc.constant('flush' as const), ok: fc.boolean(), evict: fc.nat({ max: 8 }) })),
      w(2, fc.record({ kind: fc.constant('evict' as const), rank: fc.nat({ max: 2 }), n: fc.nat({ max: 30 }) })),
      w(row.concurrent ? 2 : 0, fc.record({ kind: fc.constant('prefetch' as const), pick })),
      w(row.concurrent ? 2 : 0, fc.record({ kind: fc.constant('fetched' as const), pick, counts: fc.array(fc.nat({ max: 6 }), { minLength: 1, maxLength: 2 }) })),
    );
  }
  if (row.policy === 'priority') {
    ops.push(
      w(2, fc.record({ kind: fc.constant('retain' as const), pick, marks: fc.array(markArb, { maxLength: 2 }) })),
      w(2, fc.record({ kind: fc.constant('tick' as const), dt: fc.nat({ max: 3 }) })),
    );
  }
  return fc.oneof(...ops.filter((o) => o.weight > 0));
}

/**
 * Fills the host tier with every prompt family first (each finished
 * sequence offloads), so random runs meet host hits; one family's offload
 * fails. Salted and unsalted twins of a family when the row mixes salts.
 */
export function warmUp(row: Row): Op[] {
  if (!row.host) return [];
  const out: Op[] = [];
  let n = 0;
  for (const prompt of [0, 1, 2, 3]) {
    for (const salt of row.salt ? [0, 1] : [0]) {
      out.push(
        { kind: 'new', prompt, len: 20, salt, start: true },
        { kind: 'finish', pick: n++, withoutCache: false },
        { kind: 'flush', ok: prompt !== 1, evict: 30 },
      );
    }
  }
  return out;
}
