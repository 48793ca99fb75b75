// How long an engine step takes, from what the step computes (docs/timing.md):
// a timing model maps a step's batch (prefill tokens computed and skipped,
// decoding sequences and their context, blocks loaded from the host tier) to
// milliseconds. Two models ship: a polynomial with documented, illustrative
// coefficients, and one interpolated from a profiled table of measured
// prefill and decode times, so that a user can fit their own GPU.

import { checkKeys, checkObject, describe } from '../validate.js';

/** One engine step's batch, as a timing model sees it. */
export interface StepBatch {
  /** Prompt tokens computed this step (after prefix-cache and host-tier hits), every chunk summed. */
  prefillTokens: number;
  /** Prompt tokens skipped this step because a cache held them (they cost nothing to compute). */
  cachedTokens: number;
  /** Sequences with a prefill chunk this step. */
  prefillSeqs: number;
  /** Sequences decoding one token this step. */
  decodeSeqs: number;
  /** Sum of the decoding sequences' context lengths (tokens in their KV cache). */
  decodeContextTokens: number;
  /** Blocks loaded from the host tier this step. */
  hostLoadedBlocks: number;
  /**
   * Per prefill chunk, in the step's order (exactly `prefillSeqs` entries):
   * the tokens the chunk computes. They sum to `prefillTokens`.
   */
  chunkTokens: number[];
  /**
   * Per prefill chunk: the tokens of its sequence already in the KV cache
   * before the chunk (prefix-cache and host hits, earlier chunks), which its
   * attention reads.
   */
  chunkContextTokens: number[];
  /**
   * Per decoding sequence (exactly `decodeSeqs` entries): its context length,
   * the tokens in its KV cache with this step's input token. They sum to
   * `decodeContextTokens`.
   */
  decodeContexts: number[];
  /** The data-parallel rank each chunk runs on (all 0 on a one-rank engine). */
  chunkRanks: number[];
  /** The data-parallel rank each decode runs on. */
  decodeRanks: number[];
  /** The engine's data-parallel ranks, which step in lockstep (1: one rank). */
  dpRanks: number;
}

/** An empty batch: nothing computed, one rank. */
export function emptyStepBatch(): StepBatch {
  return {
    prefillTokens: 0, cachedTokens: 0, prefillSeqs: 0, decodeSeqs: 0, decodeContextTokens: 0, hostLoadedBlocks: 0,
    chunkTokens: [], chunkContextTokens: [], decodeContexts: [], chunkRanks: [], decodeRanks: [], dpRanks: 1,
  };
}

/** Empties `b` in place for the next step (its arrays keep their storage; `dpRanks` stays). */
export function clearStepBatch(b: StepBatch): void {
  b.prefillTokens = 0;
  b.cachedTokens = 0;
  b.prefillSeqs = 0;
  b.decodeSeqs = 0;
  b.decodeContextTokens = 0;
  b.hostLoadedBlocks = 0;
  // Popping is inlined where setting `length` calls into the runtime: over
  // the millions of steps of a timed fleet (a few entries each) it was a
  // tenth of the run.
  emptyList(b.chunkTokens);
  emptyList(b.chunkContextTokens);
  emptyList(b.chunkRanks);
  emptyList(b.decodeContexts);
  emptyList(b.decodeRanks);
}

function emptyList(xs: number[]): void {
  while (xs.length > 0) xs.pop();
}

/** Adds a prefill chunk of `tokens` after `context` tokens of its sequence, on dp rank `rank`. */
export function addChunk(b: StepBatch, tokens: number, context: number, rank = 0): void {
  b.prefillTokens += tokens;
  b.prefillSeqs++;
  b.chunkTokens.push(tokens);
  b.chunkContextTokens.push(context);
  b.chunkRanks.push(rank);
}

/** Adds a decode whose context (with this step's token) is `context` tokens, on dp rank `rank`. */
export function addDecode(b: StepBatch, context: number, rank = 0): void {
  b.decodeSeqs++;
  b.decodeContextTokens += context;
  b.decodeContexts.push(context);
  b.decodeRanks.push(rank);
}

export interface TimingModel {
  readonly name: string;
  /** Milliseconds the step takes (finite, >= 0). Must not keep or change `batch`. */
  stepMs(batch: Readonly<StepBatch>): number;
}

/** The polynomial's coefficients (docs/timing.md, the default model). */
export interface PolynomialTiming {
  kind: 'polynomial';
  /** Fixed cost of a step that computes anything (ms). */
  baseMs: number;
  /** Per prefill token computed (ms). */
  prefillMsPerToken: number;
  /** Per prefill token squared (ms): attention's share, quadratic in the chunk. */
  prefillMsPerToken2: number;
  /** Per decoding sequence (ms). */
  decodeMsPerSeq: number;
  /** Per context token of a decoding sequence (ms): reading its KV cache. */
  decodeMsPerContextToken: number;
  /** Bytes of one KV block (host loads move this much each). */
  blockBytes: number;
  /** Host-to-device bandwidth for host-tier loads, GB/s (1e9 bytes per second). */
  hostGBps: number;
}

/** Measured points, interpolated (docs/timing.md, profiled tables). */
export interface TableTiming {
  kind: 'table';
  /** [prefill tokens in the step, ms], increasing tokens; a step without prefill adds nothing. */
  prefill: Array<[number, number]>;
  /** [decoding sequences in the step, ms], increasing; a step without decodes adds nothing. */
  decode: Array<[number, number]>;
  /** Added per context token of a decoding sequence (ms; default 0: the table's own context). */
  decodeMsPerContextToken?: number;
  blockBytes?: number;
  hostGBps?: number;
}

export type TimingSpec = PolynomialTiming | TableTiming;

/** What `timingModel` takes: a spec whose polynomial coefficients left out keep their defaults. */
export type TimingSpecInput = TableTiming | ({ kind: 'polynomial' } & Partial<Omit<PolynomialTiming, 'kind'>>);

/**
 * Illustrative coefficients for an 8B-parameter model in 16-bit weights on
 * one current datacenter GPU (about 16,000 prefill tokens/s, a decode step
 * of ~7 ms at 32 sequences): an order of magnitude, not a measurement. Fit
 * your own with a profiled table.
 */
export const DEFAULT_TIMING: Readonly<PolynomialTiming> = Object.freeze({
  kind: 'polynomial',
  baseMs: 5,
  prefillMsPerToken: 0.06,
  prefillMsPerToken2: 2e-6,
  decodeMsPerSeq: 0.05,
  decodeMsPerContextToken: 2e-5,
  // 16 tokens x 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes.
  blockBytes: 2 * 1024 * 1024,
  hostGBps: 25,
});

const POLY_KEYS = Object.keys(DEFAULT_TIMING);
const TABLE_KEYS = ['kind', 'prefill', 'decode', 'decodeMsPerContextToken', 'blockBytes', 'hostGBps'];

function nonNegative(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`${name} must be a finite number >= 0, got ${describe(v)}`);
  return v;
}

function positive(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new RangeError(`${name} must be a finite number > 0, got ${describe(v)}`);
  return v;
}

/** Points of a profiled curve: pairs [x, ms], x strictly increasing and >= 1, ms >= 0. */
function points(name: string, v: unknown): Array<[number, number]> {
  if (!Array.isArray(v) || v.length === 0) throw new TypeError(`${name} must be a non-empty array of [x, ms] pairs, got ${describe(v)}`);
  let last = 0;
  return v.map((p: unknown, i) => {
    if (!Array.isArray(p) || p.length !== 2) throw new TypeError(`${name}[${i}] must be a pair [x, ms], got ${describe(p)}`);
    const x = positive(`${name}[${i}][0]`, p[0]);
    if (x <= last) throw new RangeError(`${name}[${i}][0] must be larger than the point before (${last}), got ${x}`);
    last = x;
    return [x, nonNegative(`${name}[${i}][1]`, p[1])];
  });
}

/** Piecewise linear through the points and (0, 0), extended past the last point along its last segment. */
function interpolate(pts: ReadonlyArray<readonly [number, number]>, x: number): number {
  if (x <= 0) return 0;
  let x0 = 0;
  let y0 = 0;
  for (let i = 0; i < pts.length; i++) {
    const [x1, y1] = pts[i]!;
    if (x <= x1 || i === pts.length - 1) {
      // Past the last point: the last segment's slope (from the origin when there is one point).
      return Math.max(0, y0 + ((y1 - y0) * (x - x0)) / (x1 - x0));
    }
    x0 = x1;
    y0 = y1;
  }
  return 0;
}

function hostMs(blocks: number, blockBytes: number, gbps: number): number {
  return blocks === 0 ? 0 : (blocks * blockBytes) / (gbps * 1e6);
}

class Polynomial implements TimingModel {
  readonly name = 'polynomial';
  constructor(private readonly c: PolynomialTiming) {}

  stepMs(b: Readonly<StepBatch>): number {
    const c = this.c;
    const P = b.prefillTokens;
    if (P === 0 && b.decodeSeqs === 0 && b.hostLoadedBlocks === 0) return 0;
    return c.baseMs + c.prefillMsPerToken * P + c.prefillMsPerToken2 * P * P + c.decodeMsPerSeq * b.decodeSeqs + c.decodeMsPerContextToken * b.decodeContextTokens + hostMs(b.hostLoadedBlocks, c.blockBytes, c.hostGBps);
  }
}

class Table implements TimingModel {
  readonly name = 'table';
  constructor(private readonly t: Required<TableTiming>) {}

  stepMs(b: Readonly<StepBatch>): number {
    const t = this.t;
    return interpolate(t.prefill, b.prefillTokens) + interpolate(t.decode, b.decodeSeqs) + t.decodeMsPerContextToken * b.decodeContextTokens + hostMs(b.hostLoadedBlocks, t.blockBytes, t.hostGBps);
  }
}

/** Checks a spec (every field named in a refusal) and returns it complete. */
export function parseTimingSpec(spec: unknown, name = 'timing'): TimingSpec {
  checkObject(name, spec);
  const o = spec as Record<string, unknown>;
  if (o['kind'] === 'polynomial') {
    checkKeys(name, o, POLY_KEYS);
    const out = { ...DEFAULT_TIMING } as PolynomialTiming;
    for (const k of POLY_KEYS) {
      if (k === 'kind' || o[k] === undefined) continue;
      (out as unknown as Record<string, number>)[k] = k === 'blockBytes' || k === 'hostGBps' ? positive(`${name}.${k}`, o[k]) : nonNegative(`${name}.${k}`, o[k]);
    }
    return out;
  }
  if (o['kind'] === 'table') {
    checkKeys(name, o, TABLE_KEYS);
    return {
      kind: 'table',
      prefill: points(`${name}.prefill`, o['prefill']),
      decode: points(`${name}.decode`, o['decode']),
      decodeMsPerContextToken: o['decodeMsPerContextToken'] === undefined ? 0 : nonNegative(`${name}.decodeMsPerContextToken`, o['decodeMsPerContextToken']),
      blockBytes: o['blockBytes'] === undefined ? DEFAULT_TIMING.blockBytes : positive(`${name}.blockBytes`, o['blockBytes']),
      hostGBps: o['hostGBps'] === undefined ? DEFAULT_TIMING.hostGBps : positive(`${name}.hostGBps`, o['hostGBps']),
    };
  }
  throw new RangeError(`${name}.kind must be "polynomial" or "table", got ${describe(o['kind'])}`);
}

/** The model a spec describes (none: the default polynomial); a TimingModel of your own is used as it is. */
export function timingModel(spec?: TimingSpecInput | TimingModel): TimingModel {
  if (spec === undefined) return new Polynomial({ ...DEFAULT_TIMING });
  if (spec !== null && typeof spec === 'object' && typeof (spec as TimingModel).stepMs === 'function') {
    if (typeof (spec as TimingModel).name !== 'string') throw new TypeError(`timing: a TimingModel needs a string name, got ${describe((spec as TimingModel).name)}`);
    return spec as TimingModel;
  }
  const p = parseTimingSpec(spec);
  return p.kind === 'polynomial' ? new Polynomial(p) : new Table(p as Required<TableTiming>);
}
