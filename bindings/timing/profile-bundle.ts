// A profile bundle (docs/timing.md, the bundle): per-layer kernel times
// measured on one GPU for one model, per TP degree, with the model's config
// and its architecture's layer sequence. Parsed from the files' texts here
// (any platform); reading a folder is Node's (node/profile-files.ts).

import { parse as parseYaml } from 'yaml';
import { describe } from '../validate.js';
import { cellNumber, readCsv } from './bundle-csv.js';
import { contentHash } from './content-hash.js';
import { curveOf, type Curve } from './curve.js';
import { parseAttention, type AttentionGrid } from './profile-attention.js';
import { parseCalibration, type Calibration } from './calibration.js';

/** The texts of a bundle's files. */
export interface ProfileBundleFiles {
  /** The bundle's name in a model's name (a preset's name, a path). Default: hardware/model/variant from meta.yaml. */
  name?: string;
  /** meta.yaml */
  meta: string;
  /** The model's Hugging Face config (models/<model>.json of the bundle's root). */
  model: string;
  /** The architecture's catalog with its `sequence:` (architectures/<architecture>.yaml). */
  architecture: string;
  /** Per TP degree, its folder's files by name: dense.csv, per_sequence.csv, attention.csv; moe.csv (MoE models); skew_fit.csv (optional). */
  tp: Record<number, Record<string, string>>;
  /** calibration.json (optional): the overhead and link fitted to measured runs of the GPU, the model's defaults (docs/validation.md). */
  calibration?: string;
}

/** What the timing model needs of the model's config. */
export interface ModelShape {
  /** Its name (meta.yaml `model`). */
  name: string;
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
  /** The dense MLP's intermediate size (0 for a MoE model without one). */
  intermediate: number;
  /** Routed experts (0: a dense model). */
  experts: number;
  expertsPerToken: number;
  /** One expert's intermediate size. */
  expertIntermediate: number;
  tiedEmbeddings: boolean;
  /** Bytes of one weight or KV element (2 for bf16/fp16). */
  dtypeBytes: number;
}

/** moe.csv: the sparse-MoE block of one layer, per activated-expert count a curve over tokens. */
export interface MoeTable {
  readonly experts: Float64Array;
  readonly tokens: Curve[];
}

export interface SkewFit {
  alphaDefault: number;
  /** alpha by "pc|n_label|skew_rate_label|kv_big_label|kp_label". */
  alpha: Record<string, number>;
}

/** skew_fit.bucket_axes of meta.yaml: bins (upper edges after the first) and their labels. */
export interface SkewAxes {
  n: { bins: number[]; labels: string[] };
  skewRate: { bins: number[]; labels: string[] };
  kvBig: { bins: number[]; labels: string[] };
  kp: { bins: number[]; labels: string[] };
}

export interface TpTables {
  /** dense.csv: per layer name, us over the step's tokens. */
  dense: Record<string, Curve>;
  /** per_sequence.csv: per layer name, us over the sequences that sample. */
  perSequence: Record<string, Curve>;
  attention: AttentionGrid;
  moe?: MoeTable;
  skew?: SkewFit;
}

/** A parsed bundle: plain data (it can be sent to a worker thread). */
export interface ProfileBundle {
  name: string;
  /** SHA-256 of every file's text (docs/timing.md, names). */
  sha256: string;
  gpu: string;
  hardware: string;
  variant: string;
  vllmVersion: string;
  /** The engine's block size when profiled (16). */
  blockSize: number;
  /** The engine's token budget when profiled: the attention grid's top chunk. */
  maxNumBatchedTokens?: number;
  model: ModelShape;
  architecture: string;
  /** One forward pass: ops once at the step's tokens, per layer at its tokens, once at its sequences; and whether the MLP is a MoE block. */
  sequence: { prologue: string[]; layer: string[]; head: string[]; moe: boolean };
  skewAxes?: SkewAxes;
  tp: Record<number, TpTables>;
  /** The calibration shipped with the bundle: the profile model's default overhead and link (not in sha256: the tables are what it names). */
  calibration?: Calibration;
}

type Obj = Record<string, unknown>;

function obj(where: string, v: unknown): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new TypeError(`${where} must be a mapping, got ${describe(v)}`);
  return v as Obj;
}

function str(where: string, v: unknown): string {
  if (typeof v !== 'string' || v === '') throw new TypeError(`${where} must be a non-empty string, got ${describe(v)}`);
  return v;
}

function int(where: string, v: unknown, min: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw new RangeError(`${where} must be an integer >= ${min}, got ${describe(v)}`);
  return v;
}

function strings(where: string, v: unknown): string[] {
  if (v === null || v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new TypeError(`${where} must be a list of names, got ${describe(v)}`);
  return v as string[];
}

function numbers(where: string, v: unknown): number[] {
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'number' || !Number.isFinite(x))) throw new TypeError(`${where} must be a list of numbers, got ${describe(v)}`);
  return v as number[];
}

function yamlOf(where: string, text: unknown): Obj {
  if (typeof text !== 'string') throw new TypeError(`${where} must be the file's text, got ${describe(text)}`);
  let v: unknown;
  try {
    v = parseYaml(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (e) {
    throw new TypeError(`${where}: not YAML: ${(e as Error).message.split('\n')[0]}`);
  }
  return obj(where, v);
}

/** "0, 16-2048 x2": the values of a declared grid axis. */
export function gridAxis(where: string, v: unknown): number[] {
  const out: number[] = [];
  for (const part of str(where, String(v)).split(',').map((p) => p.trim())) {
    const m = /^(\d+)(?:-(\d+)\s*x\s*(\d+(?:\.\d+)?))?$/.exec(part);
    if (m === null) throw new RangeError(`${where}: cannot read ${JSON.stringify(part)} (a value, or "lo-hi xF")`);
    const lo = Number(m[1]);
    if (m[2] === undefined) {
      out.push(lo);
      continue;
    }
    const hi = Number(m[2]);
    const f = Number(m[3]);
    if (lo < 1 || f <= 1 || hi < lo) throw new RangeError(`${where}: ${JSON.stringify(part)} is not a growing range`);
    for (let x = lo; x <= hi; x = Math.round(x * f)) out.push(x);
  }
  return out;
}

function modelShape(name: string, text: string, where: string): ModelShape {
  let v: unknown;
  try {
    v = JSON.parse(typeof text === 'string' && text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (e) {
    throw new TypeError(`${where}: not JSON: ${(e as Error).message}`);
  }
  const c = obj(where, v);
  const field = (k: string, min = 1) => int(`${where} ${k}`, c[k], min);
  const hidden = field('hidden_size');
  const heads = field('num_attention_heads');
  const experts = c['num_experts'] ?? c['num_local_experts'];
  const moe = experts !== undefined && experts !== null && experts !== 0;
  const dtype = c['torch_dtype'] ?? c['dtype'] ?? 'bfloat16';
  const dtypeBytes = { bfloat16: 2, float16: 2, float32: 4 }[String(dtype)];
  if (dtypeBytes === undefined) throw new RangeError(`${where} torch_dtype must be bfloat16, float16 or float32, got ${describe(dtype)}`);
  return {
    name,
    layers: field('num_hidden_layers'),
    hidden,
    heads,
    kvHeads: c['num_key_value_heads'] === undefined ? heads : field('num_key_value_heads'),
    headDim: c['head_dim'] === undefined || c['head_dim'] === null ? hidden / heads : field('head_dim'),
    vocab: field('vocab_size'),
    intermediate: c['intermediate_size'] === undefined ? 0 : field('intermediate_size', 0),
    experts: moe ? int(`${where} num_experts`, experts, 1) : 0,
    expertsPerToken: moe ? field('num_experts_per_tok') : 0,
    expertIntermediate: moe ? (c['moe_intermediate_size'] !== undefined ? field('moe_intermediate_size') : field('intermediate_size')) : 0,
    tiedEmbeddings: c['tie_word_embeddings'] === true,
    dtypeBytes,
  };
}

/** layer,<axis>,time_us: a curve per layer name. */
function curves(where: string, text: string, axis: string): Record<string, Curve> {
  const t = readCsv(where, text, ['layer', axis, 'time_us']);
  const byOp = new Map<string, Map<number, [number, number]>>();
  t.rows.forEach((r, i) => {
    const line = t.lines[i]!;
    if (r[0] === '') throw new RangeError(`${where} line ${line}: layer must be a name, got ""`);
    const x = cellNumber(where, line, axis, r[1]!, 1, true);
    const us = cellNumber(where, line, 'time_us', r[2]!, 0, false);
    const pts = byOp.get(r[0]!) ?? byOp.set(r[0]!, new Map()).get(r[0]!)!;
    const seen = pts.get(x);
    if (seen !== undefined) throw new RangeError(`${where} line ${line}: ${r[0]} at ${axis} ${x} is measured twice (line ${seen[1]})`);
    pts.set(x, [us, line]);
  });
  const out: Record<string, Curve> = {};
  for (const [op, pts] of byOp) {
    const xs = [...pts.keys()].sort((a, b) => a - b);
    out[op] = curveOf(Float64Array.from(xs), Float64Array.from(xs, (x) => pts.get(x)![0]));
  }
  return out;
}

function moeTable(where: string, text: string): MoeTable {
  const t = readCsv(where, text, ['tokens', 'activated_experts', 'time_us']);
  const byE = new Map<number, Map<number, number>>();
  t.rows.forEach((r, i) => {
    const line = t.lines[i]!;
    const tok = cellNumber(where, line, 'tokens', r[0]!, 1, true);
    const e = cellNumber(where, line, 'activated_experts', r[1]!, 1, true);
    const us = cellNumber(where, line, 'time_us', r[2]!, 0, false);
    const pts = byE.get(e) ?? byE.set(e, new Map()).get(e)!;
    if (pts.has(tok)) throw new RangeError(`${where} line ${line}: tokens ${tok} at ${e} experts is measured twice`);
    pts.set(tok, us);
  });
  const es = [...byE.keys()].sort((a, b) => a - b);
  return {
    experts: Float64Array.from(es),
    tokens: es.map((e) => {
      const pts = byE.get(e)!;
      const xs = [...pts.keys()].sort((a, b) => a - b);
      return curveOf(Float64Array.from(xs), Float64Array.from(xs, (x) => pts.get(x)!));
    }),
  };
}

function skewAxes(where: string, v: unknown): SkewAxes {
  const a = obj(where, v);
  const pair = (bins: string, labels: string) => {
    const b = numbers(`${where}.${bins}`, a[bins]);
    const l = strings(`${where}.${labels}`, a[labels]);
    if (b.length !== l.length + 1) throw new RangeError(`${where}.${bins} must have one more edge than ${labels} has labels`);
    return { bins: b, labels: l };
  };
  return { n: pair('n_bins', 'n_labels'), skewRate: pair('skew_rate_bins', 'skew_rate_labels'), kvBig: pair('kv_big_bins', 'kv_big_labels'), kp: pair('kp_bins', 'kp_labels') };
}

function skewFit(where: string, text: string, alphaDefault: number): SkewFit {
  const cols = ['pc', 'n_label', 'skew_rate_label', 'kv_big_label', 'kp_label', 'alpha', 'n_samples'];
  const t = readCsv(where, text, cols);
  const alpha: Record<string, number> = {};
  t.rows.forEach((r, i) => {
    const line = t.lines[i]!;
    const pc = cellNumber(where, line, 'pc', r[0]!, 0, true);
    alpha[`${pc}|${r[1]}|${r[2]}|${r[3]}|${r[4]}`] = cellNumber(where, line, 'alpha', r[5]!, -Infinity, false);
  });
  return { alphaDefault, alpha };
}

const LAYER_FILES = ['dense.csv', 'per_sequence.csv', 'attention.csv', 'moe.csv', 'skew_fit.csv'];

/** The tables of TP folder `d` from its files' texts (skew: the skew fit's per-TP settings, when it is enabled). */
function tpTables(d: number, texts: Record<string, string>, sequence: ProfileBundle['sequence'], architecture: string, pcGrid: number[] | undefined, ndGrid: number[] | undefined, skew: { perTp: Obj } | undefined): TpTables {
  const dense = curves(`tp${d}/dense.csv`, texts['dense.csv']!, 'tokens');
  const perSequence = curves(`tp${d}/per_sequence.csv`, texts['per_sequence.csv']!, 'sequences');
  const attention = parseAttention(`tp${d}/attention.csv`, texts['attention.csv']!, pcGrid, ndGrid);
  const tables: TpTables = { dense, perSequence, attention };
  if (texts['moe.csv'] !== undefined) tables.moe = moeTable(`tp${d}/moe.csv`, texts['moe.csv']);
  if (skew !== undefined && texts['skew_fit.csv'] !== undefined) {
    const own = skew.perTp[d] ?? skew.perTp[String(d)];
    const alphaDefault = own === undefined ? 0 : Number(obj(`meta.yaml skew_fit.per_tp.${d}`, own)['alpha_default'] ?? 0);
    // Parsed when read, as the folder is: the skew fit is off unless a model asks for it.
    let fit: SkewFit | undefined;
    Object.defineProperty(tables, 'skew', {
      enumerable: true,
      configurable: true,
      get: () => (fit ??= skewFit(`tp${d}/skew_fit.csv`, texts['skew_fit.csv']!, Number.isFinite(alphaDefault) ? alphaDefault : 0)),
    });
  }
  for (const op of [...sequence.prologue, ...sequence.layer]) {
    if (dense[op] === undefined) throw new RangeError(`architectures/${architecture}.yaml runs ${op}, which tp${d}/dense.csv does not have`);
  }
  for (const op of sequence.head) {
    if (perSequence[op] === undefined && dense[op] === undefined) throw new RangeError(`architectures/${architecture}.yaml runs ${op}, which neither tp${d}/per_sequence.csv nor tp${d}/dense.csv has`);
  }
  return tables;
}

/** Parses a bundle from its files' texts; every refusal names the file (and line). */
export function parseProfileBundle(files: ProfileBundleFiles): ProfileBundle {
  const f = obj('bundle files', files);
  const meta = yamlOf('meta.yaml', f['meta']);
  const modelName = str('meta.yaml model', meta['model']);
  const architecture = str('meta.yaml architecture', meta['architecture']);
  const hardware = str('meta.yaml hardware', meta['hardware'] ?? meta['gpu']);
  const variant = String(meta['variant'] ?? '');
  const name = f['name'] === undefined ? `${hardware}/${modelName}${variant === '' ? '' : `/${variant}`}` : str('bundle name', f['name']);
  const model = modelShape(modelName, f['model'] as string, `models/${modelName}.json`);
  const arch = yamlOf(`architectures/${architecture}.yaml`, f['architecture']);
  const seq = obj(`architectures/${architecture}.yaml sequence`, arch['sequence']);
  const part = (k: string) => strings(`architectures/${architecture}.yaml sequence.${k}`, seq[k]);
  const mlpMoe = part('mlp_moe');
  const strange = mlpMoe.find((x) => x !== 'moe');
  if (strange !== undefined) throw new RangeError(`architectures/${architecture}.yaml sequence.mlp_moe: only "moe" is known, got ${JSON.stringify(strange)}`);
  const sequence = {
    prologue: part('prologue'),
    layer: [...part('pre_attn'), ...part('post_attn'), ...part('mlp_dense')].filter((x) => x !== 'attention'),
    head: part('head'),
    moe: mlpMoe.length > 0,
  };
  if (sequence.moe !== model.experts > 0) throw new RangeError(`architectures/${architecture}.yaml: a ${sequence.moe ? 'MoE' : 'dense'} sequence for ${modelName}, whose config has ${model.experts} experts`);
  const engine = meta['engine_effective'] === undefined ? {} : obj('meta.yaml engine_effective', meta['engine_effective']);
  const grid = meta['attention_grid'] === undefined ? {} : obj('meta.yaml attention_grid', meta['attention_grid']);
  const pcGrid = grid['chunks'] === undefined ? undefined : gridAxis('meta.yaml attention_grid.chunks', grid['chunks']);
  const ndGrid = grid['n_decode'] === undefined ? undefined : gridAxis('meta.yaml attention_grid.n_decode', grid['n_decode']);
  const fit = meta['skew_fit'] === undefined || meta['skew_fit'] === null ? {} : obj('meta.yaml skew_fit', meta['skew_fit']);
  const skewOn = fit['enabled'] === true;
  const axes = skewOn ? skewAxes('meta.yaml skew_fit.bucket_axes', fit['bucket_axes']) : undefined;
  const perTp = skewOn && fit['per_tp'] !== undefined ? obj('meta.yaml skew_fit.per_tp', fit['per_tp']) : {};

  const tpFiles = obj('bundle files tp', f['tp']);
  const degrees = Object.keys(tpFiles).map(Number).sort((a, b) => a - b);
  if (degrees.length === 0 || degrees.some((d) => !Number.isInteger(d) || d < 1)) throw new RangeError(`bundle files tp must map TP degrees (1, 2, ...) to their files, got ${describe(Object.keys(tpFiles))}`);
  const tp: Record<number, TpTables> = {};
  const hashed: Array<[string, string]> = [['meta.yaml', f['meta'] as string], ['model', f['model'] as string], ['architecture', f['architecture'] as string]];
  let moeFiles = 0;
  for (const d of degrees) {
    const folder = obj(`bundle files tp[${d}]`, tpFiles[d]);
    const unknown = Object.keys(folder).find((k) => !LAYER_FILES.includes(k));
    if (unknown !== undefined) throw new RangeError(`tp${d}/${unknown}: not a file of the bundle format (${LAYER_FILES.join(', ')})`);
    const texts: Record<string, string> = {};
    for (const file of LAYER_FILES) {
      const v = folder[file];
      if (v === undefined) {
        if (file === 'dense.csv' || file === 'per_sequence.csv' || file === 'attention.csv') throw new TypeError(`tp${d}/${file} is missing`);
        continue;
      }
      if (typeof v !== 'string') throw new TypeError(`tp${d}/${file} must be the file's text, got ${describe(v)}`);
      hashed.push([`tp${d}/${file}`, v]);
      texts[file] = v;
    }
    if (texts['moe.csv'] !== undefined) moeFiles++;
    // A folder's tables are parsed when first read: a run times one TP
    // degree (a preset's other folder and its skew fit are most of the
    // bundle's text). Reading the property (a worker's copy, JSON) parses it,
    // so the bundle stays plain data to every reader.
    let tables: TpTables | undefined;
    Object.defineProperty(tp, d, {
      enumerable: true,
      configurable: true,
      get: () => (tables ??= tpTables(d, texts, sequence, architecture, pcGrid, ndGrid, skewOn ? { perTp } : undefined)),
    });
  }
  if (sequence.moe && moeFiles === 0) throw new RangeError(`${name}: a MoE model needs moe.csv in at least one TP folder`);
  const budget = engine['max_num_batched_tokens'];
  let calibration: Calibration | undefined;
  if (f['calibration'] !== undefined) {
    if (typeof f['calibration'] !== 'string') throw new TypeError(`calibration.json must be the file's text, got ${describe(f['calibration'])}`);
    calibration = parseCalibration(f['calibration'], 'calibration.json');
    if (calibration.hardware !== hardware) throw new RangeError(`calibration.json: fitted on ${calibration.hardware}, but the bundle was measured on ${hardware}`);
  }
  return {
    name,
    sha256: contentHash(hashed),
    gpu: String(meta['gpu'] ?? hardware),
    hardware,
    variant,
    vllmVersion: String(meta['vllm_version'] ?? ''),
    blockSize: engine['block_size'] === undefined ? 16 : int('meta.yaml engine_effective.block_size', engine['block_size'], 1),
    ...(typeof budget === 'number' && { maxNumBatchedTokens: budget }),
    model,
    architecture,
    sequence,
    ...(axes !== undefined && { skewAxes: axes }),
    tp,
    ...(calibration !== undefined && { calibration }),
  };
}
