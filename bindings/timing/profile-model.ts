// The profile model (docs/timing.md, the profile model): a step's time from
// a bundle of per-layer kernel times measured on a GPU, composed as one
// forward pass runs them, per data-parallel rank, plus tensor- and
// expert-parallel communication over a link model, host loads and a
// per-step CPU overhead. All tables are in microseconds per layer.

import { along, curveAt, sumCurves, type At, type Curve } from './curve.js';
import { kvBytesPerToken, weightBytesPerGpu } from './kv-capacity.js';
import { attentionUs, decodeCurves, topChunk, type AttentionGrid } from './profile-attention.js';
import type { MoeTable, ProfileBundle, SkewAxes, SkewFit } from './profile-bundle.js';
import { checkBatch, checkRanks, type KvFacts, type StepBatch, type TimingModel } from './step-batch.js';
import { shortHash } from './content-hash.js';

/** The profile model's parameters, complete (docs/timing.md, the profile model). */
export interface ProfileParameters {
  tp: number;
  /** Added to every step that computes anything, ms (>= 0). */
  cpuOverheadMs: number;
  /** Per hop of a collective, us. */
  linkLatencyUs: number;
  /** Per link, GB/s (1e9 bytes per second). */
  linkGBps: number;
  /** Blend decode attention toward the longest context by the bundle's skew fit. */
  skew: boolean;
  /** Host-to-device bandwidth for host-tier loads, GB/s. */
  hostGBps: number;
  /** Bytes a host-tier block load moves. */
  blockBytes: number;
  /** One GPU's memory, GiB (undefined: unknown). */
  gpuMemoryGib: number | undefined;
}

const moeRow: At<MoeTable> = (t, i, tokens) => curveAt(t.tokens[i]!, tokens);

/** The MoE block at `tokens` tokens and `experts` distinct experts hit. */
function moeAt(t: MoeTable, tokens: number, experts: number): number {
  return along(t.experts, Math.max(experts, 1), moeRow, t, Math.max(tokens, 1), 0, 0);
}

function label(bins: readonly number[], labels: readonly string[], v: number): string {
  for (let i = 0; i < labels.length; i++) if (v <= bins[i + 1]!) return labels[i]!;
  return labels[labels.length - 1]!;
}

/** Expected distinct experts hit when `pairs` token-expert choices fall uniformly on `experts` experts, of which `local` are this GPU's. */
function distinctExperts(experts: number, local: number, pairs: number): number {
  return local * (1 - Math.pow(1 - 1 / experts, pairs));
}

export class ProfileModel implements TimingModel {
  readonly name: string;
  readonly kv: KvFacts;
  private readonly layers: number;
  private readonly hidden: number;
  private readonly dtypeBytes: number;
  /** layers x the per-layer dense ops, plus the prologue, over the step's tokens (us). */
  private readonly perToken: Curve;
  /** The head's ops over the sequences that sample (us). */
  private readonly perSequence: Curve;
  private readonly attention: AttentionGrid;
  /** perToken and perSequence at each whole count up to their length, and decode-only attention per decode count: looked up, not searched. */
  private readonly tokenUs: Float64Array;
  private readonly seqUs: Float64Array;
  private readonly decodeOnly: Array<Curve | undefined>;
  private readonly top: number;
  private readonly moeOwn: MoeTable | undefined;
  private readonly moeWhole: MoeTable | undefined;
  private readonly experts: number;
  private readonly expertsPerToken: number;
  private readonly skewFit: SkewFit | undefined;
  private readonly skewAxes: SkewAxes | undefined;
  private readonly bwBytesPerUs: number;
  // The rank being timed, summed over its chunks and decodes (fields, not
  // locals, so that the attention and skew helpers read them; nothing is
  // allocated per step).
  private tok = 0;
  private seq = 0;
  private pcSum = 0;
  private kpSum = 0;
  private nd = 0;
  private kdSum = 0;
  private kdMin = 0;
  private kdMax = 0;
  /** Attention pieces of its chunks, their attention alone summed, and the longest (its tokens, history, attention alone, how many as long). */
  private pieces = 0;
  private alone = 0;
  private bestC = 0;
  private bestH = 0;
  private bestA = 0;
  private ties = 0;

  constructor(readonly bundle: ProfileBundle, readonly p: ProfileParameters) {
    const t = bundle.tp[p.tp];
    if (t === undefined) throw new RangeError(`timing.tp: profile ${bundle.name} has TP ${Object.keys(bundle.tp).join(', ')}, got ${p.tp}`);
    const m = bundle.model;
    this.layers = m.layers;
    this.hidden = m.hidden;
    this.dtypeBytes = m.dtypeBytes;
    const scaled = (c: Curve, k: number): Curve => ({ x: c.x, y: c.y.map((v) => v * k), above: c.above * k });
    this.perToken = sumCurves([...bundle.sequence.layer.map((op) => scaled(t.dense[op]!, m.layers)), ...bundle.sequence.prologue.map((op) => t.dense[op]!)]);
    this.perSequence = sumCurves(bundle.sequence.head.map((op) => t.perSequence[op] ?? t.dense[op]!));
    this.attention = t.attention;
    this.tokenUs = Float64Array.from({ length: 16_385 }, (_, n) => curveAt(this.perToken, n));
    this.seqUs = Float64Array.from({ length: 1025 }, (_, n) => curveAt(this.perSequence, n));
    this.decodeOnly = decodeCurves(t.attention);
    this.top = topChunk(t.attention);
    this.experts = m.experts;
    this.expertsPerToken = m.expertsPerToken;
    if (bundle.sequence.moe) {
      this.moeOwn = t.moe;
      this.moeWhole = bundle.tp[1]?.moe;
      if (this.moeWhole === undefined && p.tp > 1) throw new RangeError(`timing.tp: profile ${bundle.name} has no tp1/moe.csv, which expert parallelism needs`);
      if (this.moeOwn === undefined && this.moeWhole === undefined) throw new RangeError(`profile ${bundle.name}: no moe.csv for TP ${p.tp}`);
    }
    if (p.skew) {
      if (t.skew === undefined || bundle.skewAxes === undefined) throw new RangeError(`timing.skew: profile ${bundle.name} has no skew fit at TP ${p.tp} (meta.yaml skew_fit.enabled, tp${p.tp}/skew_fit.csv)`);
      this.skewFit = t.skew;
      this.skewAxes = bundle.skewAxes;
    }
    this.bwBytesPerUs = p.linkGBps * 1e3;
    const gpuBytes = p.gpuMemoryGib === undefined ? undefined : p.gpuMemoryGib * 1024 ** 3;
    this.kv = {
      bytesPerToken: kvBytesPerToken(m, p.tp),
      gpusPerRank: p.tp,
      ...(gpuBytes !== undefined && { gpuBytes }),
      weightBytes: (dp: number) => weightBytesPerGpu(m, p.tp, bundle.sequence.moe ? dp : 1),
    };
    const fmt = (v: number) => String(Math.round(v * 1e6) / 1e6);
    this.name = `profile ${bundle.name} sha256:${shortHash(bundle.sha256)} tp ${p.tp}, cpu overhead ${fmt(p.cpuOverheadMs)} ms, link ${fmt(p.linkLatencyUs)} us ${fmt(p.linkGBps)} GB/s${p.skew ? ', skew fit' : ''}`;
  }

  /** A ring collective over n GPUs: all-reduce 2(n-1) hops moving 2(n-1)/n of the bytes, all-gather or reduce-scatter half of that. */
  private ring(bytes: number, n: number, allReduce: boolean): number {
    if (n <= 1) return 0;
    const k = allReduce ? 2 : 1;
    return k * (n - 1) * this.p.linkLatencyUs + ((k * (n - 1)) / n) * (bytes / this.bwBytesPerUs);
  }

  /**
   * One rank's attention per layer with its decodes at context kd
   * (docs/timing.md, attention of a step): one chunk as the table has it;
   * several, the smaller of two upper bounds.
   */
  private rankAttention(b: Readonly<StepBatch>, r: number, kd: number): number {
    const nd = this.nd;
    const pieces = this.pieces;
    const g = this.attention;
    if (pieces === 0) {
      const c = nd < this.decodeOnly.length ? this.decodeOnly[nd] : undefined;
      return c === undefined ? attentionUs(g, 0, 0, nd, kd) : Math.max(0, curveAt(c, kd));
    }
    let each = this.alone;
    if (nd > 0) {
      // The decodes beside the longest piece; among equally long ones, where they add least.
      let add = attentionUs(g, this.bestC, this.bestH, nd, kd) - this.bestA;
      if (this.ties > 1) {
        const top = this.top;
        const best = this.bestC;
        for (let i = 0; i < b.prefillSeqs; i++) {
          if (b.chunkRanks[i] !== r) continue;
          const c = b.chunkTokens[i]!;
          const h = b.chunkContextTokens[i]!;
          for (let off = 0; off < c; off += top) {
            if (Math.min(top, c - off) !== best) continue;
            const more = attentionUs(g, best, h + off, nd, kd) - attentionUs(g, best, h + off, 0, 0);
            if (more < add) add = more;
          }
        }
      }
      each += add;
    }
    if (pieces === 1 || this.pcSum > this.top) return each;
    return Math.min(each, attentionUs(g, this.pcSum, this.kpSum, nd, kd));
  }

  private skewed(b: Readonly<StepBatch>, r: number): number {
    const nd = this.nd;
    const mean = nd === 0 ? 0 : this.kdSum / nd;
    const tMean = this.rankAttention(b, r, mean);
    const fit = this.skewFit;
    const max = this.kdMax;
    if (fit === undefined || nd <= 1 || max === mean) return tMean;
    const ax = this.skewAxes!;
    const min = this.kdMin;
    const rate = max > min ? (mean - min) / (max - min) : 0.5;
    const key = `${this.pcSum}|${label(ax.n.bins, ax.n.labels, nd)}|${label(ax.skewRate.bins, ax.skewRate.labels, rate)}|${label(ax.kvBig.bins, ax.kvBig.labels, max)}|${label(ax.kp.bins, ax.kp.labels, this.kpSum)}`;
    const alpha = fit.alpha[key] ?? fit.alphaDefault;
    return tMean + alpha * Math.max(this.rankAttention(b, r, max) - tMean, 0);
  }

  /** Sums rank r's chunks and decodes into the fields above; false when it has none. */
  private gather(b: Readonly<StepBatch>, r: number): boolean {
    this.tok = this.seq = this.pcSum = this.kpSum = this.nd = this.kdSum = this.kdMax = 0;
    this.pieces = this.alone = this.bestC = this.bestH = this.bestA = this.ties = 0;
    this.kdMin = Infinity;
    const top = this.top;
    const g = this.attention;
    for (let i = 0; i < b.prefillSeqs; i++) {
      if (b.chunkRanks[i] !== r) continue;
      const c = b.chunkTokens[i]!;
      const h = b.chunkContextTokens[i]!;
      this.tok += c;
      this.seq++;
      this.pcSum += c;
      this.kpSum += h;
      // A chunk longer than the table's top is timed as pieces of the top after growing history.
      for (let off = 0; off < c; off += top) {
        const pc = Math.min(top, c - off);
        const a = attentionUs(g, pc, h + off, 0, 0);
        this.alone += a;
        this.pieces++;
        if (pc > this.bestC) {
          this.bestC = pc;
          this.bestH = h + off;
          this.bestA = a;
          this.ties = 1;
        } else if (pc === this.bestC) this.ties++;
      }
    }
    let nd = 0;
    let sum = 0;
    let min = Infinity;
    let max = 0;
    for (let j = 0; j < b.decodeSeqs; j++) {
      if (b.decodeRanks[j] !== r) continue;
      const k = b.decodeContexts[j]!;
      nd++;
      sum += k;
      if (k < min) min = k;
      if (k > max) max = k;
    }
    this.nd = nd;
    this.kdSum = sum;
    this.kdMin = min;
    this.kdMax = max;
    this.tok += nd;
    this.seq += nd;
    return this.seq > 0;
  }

  stepMs(b: Readonly<StepBatch>): number {
    checkBatch(b);
    const host = b.hostLoadedBlocks === 0 ? 0 : (b.hostLoadedBlocks * this.p.blockBytes) / (this.p.hostGBps * 1e6);
    if (b.prefillSeqs === 0 && b.decodeSeqs === 0) return host;
    const D = b.dpRanks;
    // MoE ranks step together: every rank runs the largest rank's tokens (vLLM pads data-parallel batches).
    const moe = this.moeOwn !== undefined || this.moeWhole !== undefined;
    let padded = 0;
    if (moe && D > 1) {
      for (let r = 0; r < D; r++) {
        let t = 0;
        for (let i = 0; i < b.prefillSeqs; i++) if (b.chunkRanks[i] === r) t += b.chunkTokens[i]!;
        for (let j = 0; j < b.decodeSeqs; j++) if (b.decodeRanks[j] === r) t++;
        if (t > padded) padded = t;
      }
    }
    const L = this.layers;
    const H = this.hidden;
    const tp = this.p.tp;
    let slowest = 0;
    let seen = 0;
    for (let r = 0; r < D; r++) {
      if (!this.gather(b, r)) continue;
      seen += this.seq;
      const T = padded > 0 ? padded : this.tok;
      let layer = this.skewFit === undefined ? this.rankAttention(b, r, this.nd === 0 ? 0 : this.kdSum / this.nd) : this.skewed(b, r);
      if (tp > 1) layer += 2 * this.ring(T * H * this.dtypeBytes, tp, true);
      if (moe) {
        const E = this.experts;
        const k = this.expertsPerToken;
        if (D === 1 && this.moeOwn !== undefined) {
          layer += moeAt(this.moeOwn, T, distinctExperts(E, E, T * k));
        } else {
          // Expert parallelism over the engine's dp x tp GPUs, each holding E / ep whole experts (tp1's table).
          const ep = D * tp;
          const all = T * D;
          layer += moeAt(this.moeWhole!, all / ep, distinctExperts(E, E / ep, all * k));
          if (D > 1) layer += this.ring(T * (H + E) * this.dtypeBytes * D, D, false) + this.ring(all * H * this.dtypeBytes, D, false);
        }
      }
      const S = this.seq;
      const us = (T < this.tokenUs.length && Number.isInteger(T) ? this.tokenUs[T]! : curveAt(this.perToken, T)) + (S < this.seqUs.length ? this.seqUs[S]! : curveAt(this.perSequence, S)) + L * layer;
      if (us > slowest) slowest = us;
    }
    // Every sequence on some rank: one the loop above did not count names a rank outside the engine's.
    if (seen !== b.prefillSeqs + b.decodeSeqs) checkRanks(b);
    return slowest / 1000 + this.p.cpuOverheadMs + host;
  }
}
