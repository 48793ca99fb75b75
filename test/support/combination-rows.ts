// The rows of the combination table (docs/combinations.md): every supported
// combination of rank kind, linear state, concurrency, host tier, cache salt
// and eviction policy, the rows refused at construction with the reason the
// table gives, and the pool options a row and a drawn shape make (the same
// object builds the library's pool and the model's).

import fc from 'fast-check';
import type { BlockManagerPoolOptions } from '../../bindings/pool/pool-options.js';

export type Kind = 'plain' | 'plain, no prefix cache' | 'composite' | 'xtensor';
export type Policy = 'lru' | 'lfu' | 'priority';

export interface Row {
  kind: Kind;
  linear: boolean;
  concurrent: boolean;
  host: boolean;
  salt: boolean;
  policy: Policy;
}

export function rowName(r: Row): string {
  return [r.kind, r.linear && 'linear state', r.concurrent && 'concurrent', r.host && 'host tier', r.salt && 'salts', r.policy].filter(Boolean).join(', ');
}

const both = [false, true] as const;

/** Every supported row: 48 plain, 8 plain without a prefix cache, 8 composite, 8 XTensor. */
export const ROWS: Row[] = [
  ...both.flatMap((linear) => both.flatMap((concurrent) => both.flatMap((host) => both.flatMap((salt) =>
    (['lru', 'lfu', 'priority'] as const).map((policy): Row => ({ kind: 'plain', linear, concurrent, host, salt, policy })))))),
  ...(['plain, no prefix cache', 'composite', 'xtensor'] as const).flatMap((kind) =>
    both.flatMap((linear) => both.flatMap((concurrent) => both.map((salt): Row => ({ kind, linear, concurrent, host: false, salt, policy: 'lru' }))))),
];

/** A refused row: the options that ask for it (besides numBlocks and blockSize), the error class and the reason. */
export interface Refusal {
  name: string;
  options: Record<string, unknown>;
  host: boolean;
  error: 'TypeError' | 'RangeError';
  reason: RegExp;
}

const composite = { managerTypes: ['full'] };
const xtensor = { enableXtensor: true, numLayers: 1, slotSize: 2, pageSize: 64 };

/** The refused rows of the table, each with every choice of linear state and concurrency. */
export const REFUSALS: Refusal[] = [
  ['composite, host tier', composite, true, 'TypeError', /a host tier keeps prefix-cache blocks, and this pool has no prefix cache \(composite ranks keep none\)/],
  ['composite, LFU', { ...composite, evictionPolicy: 'lfu' }, false, 'RangeError', /'lfu' orders prefix-cache entries; this pool keeps no prefix cache/],
  ['composite, priority', { ...composite, evictionPolicy: 'priority' }, false, 'RangeError', /'priority' orders prefix-cache entries; this pool keeps no prefix cache/],
  ['XTensor, host tier', xtensor, true, 'TypeError', /a host tier keeps prefix-cache blocks, and this pool has no prefix cache \(xtensor ranks keep none\)/],
  ['XTensor, LFU', { ...xtensor, evictionPolicy: 'lfu' }, false, 'RangeError', /'lfu' orders prefix-cache entries; this pool keeps no prefix cache/],
  ['XTensor, priority', { ...xtensor, evictionPolicy: 'priority' }, false, 'RangeError', /'priority' orders prefix-cache entries; this pool keeps no prefix cache/],
  ['plain without a prefix cache, host tier', { enablePrefixCache: false }, true, 'TypeError', /a host tier keeps prefix-cache blocks, and this pool has no prefix cache \(enablePrefixCache is false\)/],
  ['plain without a prefix cache, LFU', { enablePrefixCache: false, evictionPolicy: 'lfu' }, false, 'RangeError', /'lfu' orders prefix-cache entries; this pool keeps no prefix cache/],
  ['plain without a prefix cache, priority', { enablePrefixCache: false, evictionPolicy: 'priority' }, false, 'RangeError', /'priority' orders prefix-cache entries; this pool keeps no prefix cache/],
  ['composite and XTensor together', { ...composite, ...xtensor }, false, 'TypeError', /managerTypes and enableXtensor choose two different rank kinds; choose one/],
].flatMap(([name, options, host, error, reason]) =>
  both.flatMap((linear) => both.map((concurrent): Refusal => ({
    name: `${name as string}${linear ? ', linear state' : ''}${concurrent ? ', concurrent' : ''}`,
    options: { ...(options as object), ...(linear && { enableLinearState: true }), ...(concurrent && { enableDisaggPd: true }) },
    host: host as boolean,
    error: error as Refusal['error'],
    reason: reason as RegExp,
  }))),
);

/** The sizes of one run, drawn per row. */
export interface Shape {
  numBlocks: number;
  blockSize: number;
  dpSize: number;
  singles: number;
  slots: number;
  reuse: 'furthest' | 'contiguous';
  hostBlocks: number;
  /** Which option makes a concurrent pool without a host tier: enableDisaggPd or enableKvcacheStore. */
  disagg: boolean;
  composite: { subs: { window: boolean; ratio: number }[]; window: number; maxSeqs: number; maxTokens: number };
  xtensor: { pageBlocks: number; pageExtra: number; numLayers: number; physPages: number | undefined };
}

export const shapeArb = (row: Row): fc.Arbitrary<Shape> =>
  fc.record({
    numBlocks: row.kind === 'composite' ? fc.integer({ min: 6, max: 40 }) : row.kind === 'xtensor' ? fc.integer({ min: 4, max: 30 }) : fc.integer({ min: 3, max: 36 }),
    blockSize: fc.integer({ min: 1, max: 4 }),
    dpSize: fc.integer({ min: 1, max: row.host ? 2 : 3 }),
    singles: fc.integer({ min: 2, max: 6 }),
    slots: fc.integer({ min: 2, max: 12 }),
    reuse: fc.constantFrom('furthest' as const, 'contiguous' as const),
    hostBlocks: fc.integer({ min: 2, max: 40 }),
    disagg: fc.boolean(),
    composite: fc.record({
      subs: fc.array(fc.record({ window: fc.boolean(), ratio: fc.integer({ min: 0, max: 3 }) }), { minLength: 1, maxLength: 3 }),
      window: fc.integer({ min: 1, max: 14 }),
      maxSeqs: fc.integer({ min: 0, max: 3 }),
      maxTokens: fc.integer({ min: 0, max: 12 }),
    }),
    xtensor: fc.record({
      pageBlocks: fc.integer({ min: 1, max: 4 }),
      pageExtra: fc.nat({ max: 3 }),
      numLayers: fc.integer({ min: 1, max: 2 }),
      physPages: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
    }),
  });

/** The pool options of `row` with `shape` (hostNumBlocks included with a host tier). */
export function poolOptions(row: Row, sh: Shape): BlockManagerPoolOptions & { hostNumBlocks?: number } {
  const B = sh.blockSize;
  const o: BlockManagerPoolOptions & { hostNumBlocks?: number } = { numBlocks: sh.numBlocks, blockSize: B, dpSize: sh.dpSize, singleBlockCapacity: sh.singles };
  if (row.kind === 'plain, no prefix cache') o.enablePrefixCache = false;
  if (row.kind === 'composite') {
    const c = sh.composite;
    o.managerTypes = c.subs.map((s) => (s.window ? 'sliding-window' : 'full'));
    o.compressRatios = c.subs.map((s) => (s.window ? s.ratio : Math.max(1, s.ratio)));
    if (c.subs.some((s) => s.window)) Object.assign(o, { slidingWindowSize: c.window, maxSeqsPerBatch: c.maxSeqs, maxTokensPerBatch: c.maxTokens });
  }
  if (row.kind === 'xtensor') {
    // slotSize 2: a block is B bytes per layer; a page holds pageBlocks blocks and some bytes a block straddles.
    const x = sh.xtensor;
    Object.assign(o, {
      enableXtensor: true, numLayers: x.numLayers, slotSize: 2, pageSize: x.pageBlocks * B + (x.pageExtra % B),
      ...(x.physPages !== undefined && { numPhysicalPages: x.physPages * 2 * x.numLayers }),
    });
  }
  if (row.linear) Object.assign(o, { enableLinearState: true, linearStateNumSlots: sh.slots, linearStateReuse: sh.reuse });
  // A host tier's store path needs enableKvcacheStore; without a host tier either flag makes the ranks concurrent.
  if (row.concurrent) Object.assign(o, row.host || !sh.disagg ? { enableKvcacheStore: true } : { enableDisaggPd: true });
  if (row.policy !== 'lru' || sh.disagg) o.evictionPolicy = row.policy;
  if (row.host) o.hostNumBlocks = sh.hostBlocks;
  return o;
}
