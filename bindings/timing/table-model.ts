// Profiled tables (docs/timing.md, profiled tables): measured times of steps
// that prefill x tokens, and of steps that decode x sequences, interpolated.
// A step of several prompts costs the smaller of two upper bounds: the
// prefill curve at their total (one prompt of that length attends more
// pairs than several), and the curve summed over the chunks (separate steps
// pay the fixed cost each time).

import { describe } from '../validate.js';
import { contentHash, shortHash } from './content-hash.js';
import { DEFAULT_TIMING, hostMs, nonNegative, positive } from './polynomial.js';
import { checkBatch, type KvFacts, type StepBatch, type TimingModel } from './step-batch.js';

/** Measured points, interpolated (docs/timing.md, profiled tables). */
export interface TableTiming {
  kind: 'table';
  /** Shown in the model's name beside its hash (readTimingFile gives the file's name). */
  name?: string;
  /** [prefill tokens in the step, ms], increasing tokens; a step without prefill adds nothing. */
  prefill: Array<[number, number]>;
  /** [decoding sequences in the step, ms], increasing; a step without decodes adds nothing. */
  decode: Array<[number, number]>;
  /** Added per context token of a decoding sequence (ms; default 0: the table's own context). */
  decodeMsPerContextToken?: number;
  blockBytes?: number;
  hostGBps?: number;
}

export const TABLE_KEYS = ['kind', 'name', 'prefill', 'decode', 'decodeMsPerContextToken', 'blockBytes', 'hostGBps'];

/** Points of a profiled curve: pairs [x, ms], x >= 1 and strictly increasing, ms >= 0. */
function points(name: string, v: unknown): Array<[number, number]> {
  if (!Array.isArray(v) || v.length === 0) throw new TypeError(`${name} must be a non-empty array of [x, ms] pairs, got ${describe(v)}`);
  let last = 0;
  return v.map((p: unknown, i) => {
    if (!Array.isArray(p) || p.length !== 2) throw new TypeError(`${name}[${i}] must be a pair [x, ms], got ${describe(p)}`);
    const x = positive(`${name}[${i}][0]`, p[0]);
    if (x < 1) throw new RangeError(`${name}[${i}][0] must be at least 1 (tokens or sequences), got ${x}`);
    if (x <= last) throw new RangeError(`${name}[${i}][0] must be larger than the point before (${last}), got ${x}`);
    last = x;
    return [x, nonNegative(`${name}[${i}][1]`, p[1])];
  });
}

/** A table spec with every optional field filled in (but its name). */
export type ParsedTable = Required<Omit<TableTiming, 'name'>> & { name?: string };

/** A table spec, checked and complete. */
export function parseTable(o: Record<string, unknown>, name: string): ParsedTable {
  const own = o['name'];
  if (own !== undefined && (typeof own !== 'string' || own === '')) throw new TypeError(`${name}.name must be a non-empty string, got ${describe(own)}`);
  return {
    kind: 'table',
    ...(own !== undefined && { name: own as string }),
    prefill: points(`${name}.prefill`, o['prefill']),
    decode: points(`${name}.decode`, o['decode']),
    decodeMsPerContextToken: o['decodeMsPerContextToken'] === undefined ? 0 : nonNegative(`${name}.decodeMsPerContextToken`, o['decodeMsPerContextToken']),
    blockBytes: o['blockBytes'] === undefined ? DEFAULT_TIMING.blockBytes : positive(`${name}.blockBytes`, o['blockBytes']),
    hostGBps: o['hostGBps'] === undefined ? DEFAULT_TIMING.hostGBps : positive(`${name}.hostGBps`, o['hostGBps']),
  };
}

/** Piecewise linear through the points and (0, 0), extended past the last point along its last segment. */
export function interpolate(pts: ReadonlyArray<readonly [number, number]>, x: number): number {
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

export class Table implements TimingModel {
  readonly name: string;
  readonly kv: KvFacts;

  constructor(private readonly t: ParsedTable) {
    this.name = `table ${t.name === undefined ? '' : `${t.name} `}sha256:${shortHash(contentHash([['table', JSON.stringify([t.prefill, t.decode, t.decodeMsPerContextToken, t.blockBytes, t.hostGBps])]]))}`;
    this.kv = { bytesPerToken: t.blockBytes / 16, gpusPerRank: 1 };
  }

  stepMs(b: Readonly<StepBatch>): number {
    checkBatch(b);
    const t = this.t;
    let prefill = interpolate(t.prefill, b.prefillTokens);
    if (b.prefillSeqs > 1) {
      let each = 0;
      for (let i = 0; i < b.prefillSeqs; i++) each += interpolate(t.prefill, b.chunkTokens[i]!);
      if (each < prefill) prefill = each;
    }
    return prefill + interpolate(t.decode, b.decodeSeqs) + t.decodeMsPerContextToken * b.decodeContextTokens + hostMs(b.hostLoadedBlocks, t.blockBytes, t.hostGBps);
  }
}
