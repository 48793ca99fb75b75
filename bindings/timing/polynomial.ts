// The default timing model (docs/timing.md, the default polynomial): a
// closed formula with illustrative coefficients, describing no measured GPU.
// Its quadratic term is attention's, charged per chunk: a chunk's tokens
// against themselves and against the history before them, so ten prompts in
// one step cost what ten steps of one cost, less nine fixed costs, and a
// prompt costs the same computed in one chunk or several.

import { describe } from '../validate.js';
import { contentHash, shortHash } from './content-hash.js';
import { checkBatch, type KvFacts, type StepBatch, type TimingModel } from './step-batch.js';

/** The polynomial's coefficients (docs/timing.md, the default model). */
export interface PolynomialTiming {
  kind: 'polynomial';
  /** Fixed cost of a step that computes anything (ms). */
  baseMs: number;
  /** Per prefill token computed (ms). */
  prefillMsPerToken: number;
  /** Per unit of attention work, ms: a chunk of c tokens after h tokens of history does c x (c + 2h). */
  prefillMsPerToken2: number;
  /** Per decoding sequence (ms). */
  decodeMsPerSeq: number;
  /** Per context token of a decoding sequence (ms): reading its KV cache. */
  decodeMsPerContextToken: number;
  /** Bytes of one KV block of 16 tokens (host loads move this much each; KV capacity in GiB counts it). */
  blockBytes: number;
  /** Host-to-device bandwidth for host-tier loads, GB/s (1e9 bytes per second). */
  hostGBps: number;
}

/**
 * Illustrative coefficients for an 8B-parameter model in 16-bit weights on
 * one current datacenter GPU (about 16,000 prefill tokens/s, a decode step
 * of ~7 ms at 32 sequences): an order of magnitude, not a measurement. For
 * a measured GPU, use a profile (docs/timing.md).
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

export const POLYNOMIAL_KEYS = Object.keys(DEFAULT_TIMING);

export function nonNegative(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`${name} must be a finite number >= 0, got ${describe(v)}`);
  return v;
}

export function positive(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new RangeError(`${name} must be a finite number > 0, got ${describe(v)}`);
  return v;
}

/** Milliseconds to load `blocks` host-tier blocks. */
export function hostMs(blocks: number, blockBytes: number, gbps: number): number {
  return blocks === 0 ? 0 : (blocks * blockBytes) / (gbps * 1e6);
}

/** A polynomial's coefficients from a spec, each left out at its default. */
export function parsePolynomial(o: Record<string, unknown>, name: string): PolynomialTiming {
  const out = { ...DEFAULT_TIMING } as PolynomialTiming;
  for (const k of POLYNOMIAL_KEYS) {
    if (k === 'kind' || o[k] === undefined) continue;
    (out as unknown as Record<string, number>)[k] = k === 'blockBytes' || k === 'hostGBps' ? positive(`${name}.${k}`, o[k]) : nonNegative(`${name}.${k}`, o[k]);
  }
  return out;
}

export class Polynomial implements TimingModel {
  readonly name: string;
  readonly kv: KvFacts;

  constructor(private readonly c: PolynomialTiming) {
    const own = POLYNOMIAL_KEYS.some((k) => (c as unknown as Record<string, unknown>)[k] !== (DEFAULT_TIMING as unknown as Record<string, unknown>)[k]);
    // The defaults are "polynomial"; coefficients of one's own are named by their hash.
    this.name = own ? `polynomial sha256:${shortHash(contentHash([['polynomial', JSON.stringify(POLYNOMIAL_KEYS.map((k) => (c as unknown as Record<string, unknown>)[k]))]]))}` : 'polynomial';
    this.kv = { bytesPerToken: c.blockBytes / 16, gpusPerRank: 1 };
  }

  stepMs(b: Readonly<StepBatch>): number {
    checkBatch(b);
    const c = this.c;
    if (b.prefillSeqs === 0 && b.decodeSeqs === 0 && b.hostLoadedBlocks === 0) return 0;
    let work = 0;
    for (let i = 0; i < b.prefillSeqs; i++) {
      const n = b.chunkTokens[i]!;
      work += n * (n + 2 * b.chunkContextTokens[i]!);
    }
    return c.baseMs + c.prefillMsPerToken * b.prefillTokens + c.prefillMsPerToken2 * work + c.decodeMsPerSeq * b.decodeSeqs + c.decodeMsPerContextToken * b.decodeContextTokens + hostMs(b.hostLoadedBlocks, c.blockBytes, c.hostGBps);
  }
}
