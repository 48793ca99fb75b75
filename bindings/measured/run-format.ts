// A measured serving run (docs/validation.md, the run format): the engine's
// settings (meta.json), one line per request with its arrival and the
// engine's timestamps (requests.jsonl), a per-second time series
// (timeseries.csv), and optionally the peer simulator's cluster description
// (config.json) and its prediction (llmservingsim-summary.txt). Parsed from
// the files' texts here, on any platform; reading a folder is Node's
// (node/measured-files.ts). Every refusal names the file, the line and the field.

import { MAX_SEQUENCE_TOKENS, describe } from '../validate.js';
import { parsePeerSummary, type PeerSummary } from './peer-summary.js';

/** The texts of a run's files (config and peer optional). */
export interface MeasuredRunFiles {
  /** The run's name in messages and results (its folder's name, a path). */
  name: string;
  /** meta.json */
  meta: string;
  /** requests.jsonl */
  requests: string;
  /** timeseries.csv */
  timeseries: string;
  /** config.json (the peer simulator's cluster description) */
  config?: string;
  /** llmservingsim-summary.txt (the peer simulator's prediction) */
  peer?: string;
}

/** One request as the engine saw it. Times in seconds: `arrivalTime` on the client's wall clock, the others on the engine's monotonic clock. */
export interface MeasuredRequest {
  requestId: string;
  inputTokens: number;
  outputTokens: number;
  arrivalTime: number;
  queuedTs: number;
  scheduledTs: number;
  firstTokenTs: number;
  lastTokenTs: number;
}

/** One row of timeseries.csv: a second of the run. */
export interface MeasuredTick {
  /** Seconds since the run began (the row covers (t - 1, t]). */
  t: number;
  /** Prompt tokens in that second. */
  promptThroughput: number;
  /** Generated tokens in that second. */
  genThroughput: number;
  running: number;
  waiting: number;
  /** KV cache in use, %. */
  kvCachePct: number;
}

/** meta.json, its fields named as kvpool uses them; `undefined` where the file leaves one out. */
export interface MeasuredMeta {
  model: string;
  vllmVersion?: string;
  tensorParallelSize?: number;
  dataParallelSize?: number;
  enableExpertParallel?: boolean;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  /** null: the model's own (as vLLM logs it). */
  maxModelLen?: number | null;
  dtype?: string;
  kvCacheDtype?: string;
  numGpuBlocks?: number;
  blockSize?: number;
  gpuMemoryUtilization?: number;
  deviceTotalMemoryBytes?: number;
  numRequests?: number;
}

/** config.json: what the peer simulator was told of the machine (kept for the record; kvpool takes no setting from it). */
export interface PeerCluster {
  /** GB/s */
  linkGBps?: number;
  /** The file's link_latency is in ns; here in us. */
  linkLatencyUs?: number;
  hardware?: string;
  /** One GPU's memory as the peer was told, GB. */
  memoryGB?: number;
  memoryUtilization?: number;
  tp?: number;
}

export interface MeasuredRun {
  name: string;
  meta: MeasuredMeta;
  requests: MeasuredRequest[];
  timeseries: MeasuredTick[];
  cluster?: PeerCluster;
  peer?: PeerSummary;
  /** What the files let through but a reader should know (a count that disagrees, a field kvpool ignores). */
  notes: string[];
}

type Obj = Record<string, unknown>;

/** A refusal naming where: "run/requests.jsonl line 3: \"output_toks\" must be ...". */
function fail(where: string, message: string, range = true): never {
  throw new (range ? RangeError : TypeError)(`${where}: ${message}`);
}

function jsonOf(where: string, text: unknown): unknown {
  if (typeof text !== 'string') fail(where, `must be the file's text, got ${describe(text)}`, false);
  const t = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  try {
    return JSON.parse(t);
  } catch (e) {
    return fail(where, `not valid JSON (${(e as Error).message})`, false);
  }
}

function objectAt(where: string, v: unknown): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) fail(where, `must be a JSON object, got ${describe(v)}`, false);
  return v as Obj;
}

/** The checks of one field of an object, each naming `where` and the key. */
class Fields {
  constructor(
    private readonly where: string,
    readonly o: Obj,
  ) {}

  private bad(key: string, rule: string, range = true): never {
    return fail(this.where, `"${key}" must be ${rule}, got ${describe(this.o[key])}`, range);
  }

  has(key: string): boolean {
    return this.o[key] !== undefined && this.o[key] !== null;
  }

  int(key: string, min: number, optional: true): number | undefined;
  int(key: string, min: number, optional?: false): number;
  int(key: string, min: number, optional = false): number | undefined {
    const v = this.o[key];
    if ((v === undefined || v === null) && optional) return undefined;
    if (typeof v !== 'number') this.bad(key, `an integer >= ${min}`, false);
    if (!Number.isSafeInteger(v) || (v as number) < min) this.bad(key, `an integer >= ${min}`);
    return v as number;
  }

  num(key: string, rule: (x: number) => boolean, ruleText: string, optional: true): number | undefined;
  num(key: string, rule: (x: number) => boolean, ruleText: string, optional?: false): number;
  num(key: string, rule: (x: number) => boolean, ruleText: string, optional = false): number | undefined {
    const v = this.o[key];
    if ((v === undefined || v === null) && optional) return undefined;
    if (typeof v !== 'number') this.bad(key, ruleText, false);
    if (!Number.isFinite(v) || !rule(v as number)) this.bad(key, ruleText);
    return v as number;
  }

  str(key: string, optional: true): string | undefined;
  str(key: string, optional?: false): string;
  str(key: string, optional = false): string | undefined {
    const v = this.o[key];
    if ((v === undefined || v === null) && optional) return undefined;
    if (typeof v !== 'string' || v === '') this.bad(key, 'a non-empty string', false);
    return v as string;
  }

  bool(key: string): boolean | undefined {
    const v = this.o[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'boolean') this.bad(key, 'true or false', false);
    return v as boolean;
  }

  object(key: string): Obj | undefined {
    const v = this.o[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'object' || Array.isArray(v)) this.bad(key, 'a JSON object', false);
    return v as Obj;
  }
}

const positive = (x: number) => x > 0;
const share = (x: number) => x > 0 && x <= 1;

/** meta.json: the engine's settings. */
export function parseMeta(where: string, text: string): MeasuredMeta {
  const root = objectAt(where, jsonOf(where, text));
  const top = new Fields(where, root);
  const kwargs = top.object('engine_kwargs');
  if (kwargs === undefined) fail(where, '"engine_kwargs" (the engine\'s settings) is missing', false);
  const ek = new Fields(`${where} engine_kwargs`, kwargs);
  const model = ek.str('model', true) ?? top.str('model');
  if (top.has('model') && ek.has('model') && top.str('model') !== model) fail(where, `"model" ${JSON.stringify(top.str('model'))} and engine_kwargs "model" ${JSON.stringify(model)} disagree`);
  const meta: MeasuredMeta = { model };
  const put = <K extends keyof MeasuredMeta>(k: K, v: MeasuredMeta[K] | undefined) => {
    if (v !== undefined) meta[k] = v;
  };
  put('vllmVersion', top.str('vllm_version', true));
  put('tensorParallelSize', ek.int('tensor_parallel_size', 1, true));
  put('dataParallelSize', ek.int('data_parallel_size', 1, true));
  put('enableExpertParallel', ek.bool('enable_expert_parallel'));
  put('maxNumSeqs', ek.int('max_num_seqs', 1, true));
  put('maxNumBatchedTokens', ek.int('max_num_batched_tokens', 1, true));
  if ('max_model_len' in kwargs) meta.maxModelLen = kwargs['max_model_len'] === null ? null : ek.int('max_model_len', 1);
  put('dtype', ek.str('dtype', true));
  put('kvCacheDtype', ek.str('kv_cache_dtype', true));
  const kv = top.object('kv_cache');
  if (kv !== undefined) {
    const f = new Fields(`${where} kv_cache`, kv);
    put('numGpuBlocks', f.int('num_gpu_blocks', 1, true));
    put('blockSize', f.int('block_size', 1, true));
    put('gpuMemoryUtilization', f.num('gpu_memory_utilization', share, 'a number in (0, 1]', true));
  }
  const hw = top.object('hardware');
  if (hw !== undefined) put('deviceTotalMemoryBytes', new Fields(`${where} hardware`, hw).num('device_total_memory_bytes', positive, 'a number of bytes > 0', true));
  put('numRequests', top.int('num_requests', 0, true));
  return meta;
}

const REQUEST_TIMES = ['queued_ts', 'scheduled_ts', 'first_token_ts', 'last_token_ts'] as const;

/** requests.jsonl: one request a line, in arrival order, each with its four engine times in order. */
export function parseRequests(where: string, text: string): MeasuredRequest[] {
  if (typeof text !== 'string') fail(where, `must be the file's text, got ${describe(text)}`, false);
  const lines = (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text).split('\n');
  const out: MeasuredRequest[] = [];
  const seen = new Map<string, number>();
  let blocks = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    const at = `${where} line ${i + 1}`;
    const f = new Fields(at, objectAt(at, jsonOf(at, line)));
    const o = f.o;
    const id = o['request_id'];
    if (typeof id !== 'string' && !(typeof id === 'number' && Number.isSafeInteger(id))) fail(at, `"request_id" must be a string or an integer, got ${describe(id)}`, false);
    const requestId = String(id);
    const dup = seen.get(requestId);
    if (dup !== undefined) fail(at, `"request_id" ${JSON.stringify(requestId)} is given twice (line ${dup})`);
    seen.set(requestId, i + 1);
    const inputTokens = f.int('input_toks', 1);
    const outputTokens = f.int('output_toks', 1);
    if (inputTokens + outputTokens > MAX_SEQUENCE_TOKENS) fail(at, `"input_toks" + "output_toks" = ${inputTokens + outputTokens} is more than a sequence can hold (${MAX_SEQUENCE_TOKENS} tokens)`);
    const arrivalTime = f.num('arrival_time', () => true, 'a number of seconds');
    const t = REQUEST_TIMES.map((k) => f.num(k, () => true, 'a number of seconds'));
    for (let k = 1; k < t.length; k++) {
      if (t[k]! < t[k - 1]!) fail(at, `"${REQUEST_TIMES[k]}" ${t[k]} is before "${REQUEST_TIMES[k - 1]}" ${t[k - 1]} (the engine stamps them in this order)`);
    }
    const prev = out[out.length - 1];
    if (prev !== undefined && arrivalTime < prev.arrivalTime) fail(at, `"arrival_time" ${arrivalTime} is before the previous request's ${prev.arrivalTime} (one line per request, in arrival order)`);
    // Replayed prompts share nothing: each takes its own 512-token content ids, which must stay in range.
    blocks += Math.ceil(inputTokens / 512);
    if (blocks > 4194304) fail(at, 'the run has more prompt tokens than a replay can give distinct content (2^31)');
    out.push({ requestId, inputTokens, outputTokens, arrivalTime, queuedTs: t[0]!, scheduledTs: t[1]!, firstTokenTs: t[2]!, lastTokenTs: t[3]! });
  }
  if (out.length === 0) fail(where, 'holds no request');
  return out;
}

export const TIMESERIES_COLUMNS = ['t', 'prompt_throughput', 'gen_throughput', 'running', 'waiting', 'kv_cache_pct'] as const;

/** timeseries.csv: its header names the six columns (in any order); then a row a second, t rising. */
export function parseTimeseries(where: string, text: string): MeasuredTick[] {
  if (typeof text !== 'string') fail(where, `must be the file's text, got ${describe(text)}`, false);
  const lines = (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text).split(/\r?\n/);
  const header = (lines[0] ?? '').split(',').map((h) => h.trim());
  const col = TIMESERIES_COLUMNS.map((c) => header.indexOf(c));
  const missing = TIMESERIES_COLUMNS.filter((_, k) => col[k]! < 0);
  if (missing.length > 0) fail(`${where} line 1`, `the header must name ${TIMESERIES_COLUMNS.join(', ')}; ${missing.join(', ')} missing (got ${JSON.stringify(lines[0] ?? '')})`, false);
  const extra = header.find((h) => !(TIMESERIES_COLUMNS as readonly string[]).includes(h));
  if (extra !== undefined) fail(`${where} line 1`, `unknown column ${JSON.stringify(extra)} (the columns are ${TIMESERIES_COLUMNS.join(', ')})`, false);
  const out: MeasuredTick[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    const at = `${where} line ${i + 1}`;
    const cells = line.split(',');
    if (cells.length !== header.length) fail(at, `has ${cells.length} cells, the header ${header.length}`);
    const v = (k: number, integer: boolean, max = Infinity) => {
      const name = TIMESERIES_COLUMNS[k];
      const s = cells[col[k]!]!.trim();
      const x = s === '' ? NaN : Number(s);
      if (!Number.isFinite(x) || x < 0 || x > max || (integer && !Number.isInteger(x))) {
        fail(at, `"${name}" must be ${integer ? 'an integer' : 'a number'} >= 0${max < Infinity ? ` and at most ${max}` : ''}, got ${JSON.stringify(s)}`);
      }
      return x;
    };
    const tick: MeasuredTick = { t: v(0, false), promptThroughput: v(1, false), genThroughput: v(2, false), running: v(3, true), waiting: v(4, true), kvCachePct: v(5, false, 100) };
    const prev = out[out.length - 1];
    if (prev !== undefined && tick.t <= prev.t) fail(at, `"t" ${tick.t} must be after the previous row's ${prev.t}`);
    out.push(tick);
  }
  return out;
}

/** config.json: the fields kvpool reports of the peer's cluster description, each checked where present. */
export function parseCluster(where: string, text: string): PeerCluster {
  const f = new Fields(where, objectAt(where, jsonOf(where, text)));
  const out: PeerCluster = {};
  const bw = f.num('link_bw', positive, 'a number of GB/s > 0', true);
  if (bw !== undefined) out.linkGBps = bw;
  const lat = f.num('link_latency', (x) => x >= 0, 'a number of ns >= 0', true);
  if (lat !== undefined) out.linkLatencyUs = lat / 1000;
  const nodes = f.o['nodes'];
  if (nodes === undefined) return out;
  if (!Array.isArray(nodes)) fail(where, `"nodes" must be a list, got ${describe(nodes)}`, false);
  const node = nodes[0];
  if (node === undefined) return out;
  const instances = objectAt(`${where} nodes[0]`, node)['instances'];
  if (instances === undefined) return out;
  if (!Array.isArray(instances)) fail(`${where} nodes[0]`, `"instances" must be a list, got ${describe(instances)}`, false);
  if (instances[0] === undefined) return out;
  const inst = new Fields(`${where} nodes[0].instances[0]`, objectAt(`${where} nodes[0].instances[0]`, instances[0]));
  const hw = inst.str('hardware', true);
  if (hw !== undefined) out.hardware = hw;
  const tp = inst.int('tp_size', 1, true);
  if (tp !== undefined) out.tp = tp;
  const mem = inst.object('npu_mem');
  if (mem !== undefined) {
    const m = new Fields(`${where} nodes[0].instances[0].npu_mem`, mem);
    const size = m.num('mem_size', positive, 'a number of GB > 0', true);
    if (size !== undefined) out.memoryGB = size;
    const util = m.num('mem_util', share, 'a number in (0, 1]', true);
    if (util !== undefined) out.memoryUtilization = util;
  }
  return out;
}

/** Parses and checks a whole run from its files' texts. */
export function parseMeasuredRun(files: MeasuredRunFiles): MeasuredRun {
  if (files === null || typeof files !== 'object') throw new TypeError(`files must be an object of the run's texts, got ${describe(files)}`);
  const name = files.name;
  if (typeof name !== 'string' || name === '') throw new TypeError(`files.name must be the run's name, got ${describe(name)}`);
  const meta = parseMeta(`${name}/meta.json`, files.meta);
  const requests = parseRequests(`${name}/requests.jsonl`, files.requests);
  const timeseries = parseTimeseries(`${name}/timeseries.csv`, files.timeseries);
  const notes: string[] = [];
  if (meta.numRequests !== undefined && meta.numRequests !== requests.length) notes.push(`meta.json says num_requests ${meta.numRequests}; requests.jsonl has ${requests.length}: the ${requests.length} are replayed`);
  if (meta.kvCacheDtype !== undefined && meta.kvCacheDtype !== 'auto') notes.push(`meta.json kv_cache_dtype ${JSON.stringify(meta.kvCacheDtype)}: kvpool sizes the KV cache in the profile's dtype (no quantized KV)`);
  const run: MeasuredRun = { name, meta, requests, timeseries, notes };
  if (files.config !== undefined) run.cluster = parseCluster(`${name}/config.json`, files.config);
  if (files.peer !== undefined) run.peer = parsePeerSummary(`${name}/llmservingsim-summary.txt`, files.peer);
  return run;
}
