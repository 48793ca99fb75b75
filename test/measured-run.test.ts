// The measured-run format (docs/validation.md, the run format): every field
// checked, a refusal naming the file, the line and the field; the figures
// as the run's harness defines them (ITL: the mean only); the engine
// settings with where each came from; calibrations refused field by field.

import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  parseCalibration, parseMeasuredRun, parsePeerSummary, readMeasuredRun, readProfileBundle, timingModel, validateRun, measuredFigures, runTrace,
  type MeasuredRunFiles,
} from '../bindings/index.node.js';

const ROOT = join(import.meta.dirname, '..');
const LLAMA = join(ROOT, 'measured/rtxpro6000-llama-3.1-8b');
const text = (f: string) => readFileSync(join(LLAMA, f), 'utf8');

const meta = JSON.parse(text('meta.json')) as Record<string, unknown> & { engine_kwargs: Record<string, unknown> };
const line = (o: Record<string, unknown> = {}) => JSON.stringify({ request_id: 'a', input_toks: 100, output_toks: 10, arrival_time: 5, queued_ts: 1, scheduled_ts: 1.1, first_token_ts: 1.2, last_token_ts: 2, ...o });
const TS = 't,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n1.0,100.0,10.0,1,0,0.0\n';

function files(o: Partial<MeasuredRunFiles> = {}): MeasuredRunFiles {
  return { name: 'run', meta: JSON.stringify(meta), requests: `${line()}\n${line({ request_id: 'b', arrival_time: 6 })}\n`, timeseries: TS, ...o };
}

describe('parseMeasuredRun refuses, naming the file, the line and the field', () => {
  const cases: Array<[string, Partial<MeasuredRunFiles>, RegExp]> = [
    ['meta.json not JSON', { meta: '{' }, /^run\/meta\.json: not valid JSON/],
    ['no engine_kwargs', { meta: '{"model":"m"}' }, /run\/meta\.json: "engine_kwargs" \(the engine's settings\) is missing/],
    ['a fractional TP', { meta: JSON.stringify({ ...meta, engine_kwargs: { ...meta.engine_kwargs, tensor_parallel_size: 1.5 } }) }, /run\/meta\.json engine_kwargs: "tensor_parallel_size" must be an integer >= 1, got 1\.5/],
    ['max_num_seqs as a string', { meta: JSON.stringify({ ...meta, engine_kwargs: { ...meta.engine_kwargs, max_num_seqs: '128' } }) }, /"max_num_seqs" must be an integer >= 1, got "128"/],
    ['two models', { meta: JSON.stringify({ ...meta, model: 'other' }) }, /"model" "other" and engine_kwargs "model" "meta-llama\/Llama-3\.1-8B" disagree/],
    ['a utilization above 1', { meta: JSON.stringify({ ...meta, kv_cache: { gpu_memory_utilization: 1.2 } }) }, /run\/meta\.json kv_cache: "gpu_memory_utilization" must be a number in \(0, 1\], got 1\.2/],
    ['expert parallelism as a number', { meta: JSON.stringify({ ...meta, engine_kwargs: { ...meta.engine_kwargs, enable_expert_parallel: 1 } }) }, /"enable_expert_parallel" must be true or false, got 1/],
    ['a request line not JSON', { requests: `${line()}\n{oops\n` }, /^run\/requests\.jsonl line 2: not valid JSON/],
    ['no output token', { requests: line({ output_toks: 0 }) }, /run\/requests\.jsonl line 1: "output_toks" must be an integer >= 1, got 0/],
    ['a missing time', { requests: line({ first_token_ts: undefined }) }, /line 1: "first_token_ts" must be a number of seconds, got undefined/],
    ['times out of order', { requests: line({ first_token_ts: 1.05 }) }, /line 1: "first_token_ts" 1\.05 is before "scheduled_ts" 1\.1 \(the engine stamps them in this order\)/],
    ['arrivals out of order', { requests: `${line()}\n${line({ request_id: 'b', arrival_time: 4 })}` }, /line 2: "arrival_time" 4 is before the previous request's 5 \(one line per request, in arrival order\)/],
    ['an id twice', { requests: `${line()}\n\n${line({ arrival_time: 6 })}` }, /line 3: "request_id" "a" is given twice \(line 1\)/],
    ['an id that is neither', { requests: line({ request_id: null }) }, /line 1: "request_id" must be a string or an integer, got null/],
    ['no request', { requests: '\n\n' }, /run\/requests\.jsonl: holds no request/],
    ['a column missing', { timeseries: 't,prompt_throughput,gen_throughput,running,waiting\n' }, /run\/timeseries\.csv line 1: the header must name .*; kv_cache_pct missing/],
    ['a column too many', { timeseries: `${TS.split('\n')[0]},extra\n` }, /timeseries\.csv line 1: unknown column "extra"/],
    ['a running count that is not whole', { timeseries: `${TS.split('\n')[0]}\n1,0,0,1.5,0,0\n` }, /timeseries\.csv line 2: "running" must be an integer >= 0, got "1\.5"/],
    ['a KV share above 100', { timeseries: `${TS.split('\n')[0]}\n1,0,0,1,0,101\n` }, /"kv_cache_pct" must be a number >= 0 and at most 100, got "101"/],
    ['t not rising', { timeseries: `${TS}1.0,0,0,0,0,0\n` }, /timeseries\.csv line 3: "t" 1 must be after the previous row's 1/],
    ['a short row', { timeseries: `${TS}2.0,0\n` }, /timeseries\.csv line 3: has 2 cells, the header 6/],
    ['config.json with a negative link', { config: '{"link_bw": -1}' }, /run\/config\.json: "link_bw" must be a number of GB\/s > 0, got -1/],
    ['config.json nodes not a list', { config: '{"nodes": {}}' }, /run\/config\.json: "nodes" must be a list, got an Object/],
    ['a peer line without its figures', { peer: text('llmservingsim-summary.txt').replace('TTFT P99                      19755.3     19356.6     -2.0%', 'TTFT P99 19755.3') }, /run\/llmservingsim-summary\.txt line 7: TTFT P99 needs the measured and the simulated figure in ms and the difference in %/],
    ['a peer figure missing', { peer: text('llmservingsim-summary.txt').replace(/^TPOT Median.*$/m, '') }, /llmservingsim-summary\.txt: no "TPOT Median" line/],
  ];
  for (const [what, o, message] of cases) it(what, () => expect(() => parseMeasuredRun(files(o))).toThrow(message));

  it('takes the shipped runs whole, and says what the files let through', () => {
    const run = parseMeasuredRun(files({ meta: JSON.stringify({ ...meta, num_requests: 3, engine_kwargs: { ...meta.engine_kwargs, kv_cache_dtype: 'fp8' } }) }));
    expect(run.notes).toEqual([
      'meta.json says num_requests 3; requests.jsonl has 2: the 2 are replayed',
      'meta.json kv_cache_dtype "fp8": kvpool sizes the KV cache in the profile\'s dtype (no quantized KV)',
    ]);
    const shipped = readMeasuredRun('rtxpro6000-llama-3.1-8b');
    expect(shipped.requests).toHaveLength(300);
    expect(shipped.timeseries).toHaveLength(67);
    expect(shipped.meta).toMatchObject({ model: 'meta-llama/Llama-3.1-8B', tensorParallelSize: 1, maxNumSeqs: 128, maxNumBatchedTokens: 2048, maxModelLen: null });
    expect(shipped.cluster).toEqual({ linkGBps: 16, linkLatencyUs: 20, hardware: 'RTXPRO6000', tp: 1, memoryGB: 96, memoryUtilization: 0.9 });
    expect(readMeasuredRun(LLAMA).requests).toEqual(shipped.requests);
  });

  it('readMeasuredRun names a folder that is not there, a file missing, and the shipped runs', () => {
    expect(() => readMeasuredRun('no-such-run')).toThrow(/run "no-such-run": no such folder \(shipped runs: rtxpro6000-llama-3\.1-8b, rtxpro6000-qwen3-32b\)/);
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-run-'));
    writeFileSync(join(dir, 'meta.json'), JSON.stringify(meta));
    writeFileSync(join(dir, 'requests.jsonl'), line());
    expect(() => readMeasuredRun(dir)).toThrow(/timeseries\.csv is missing/);
    writeFileSync(join(dir, 'timeseries.csv'), TS);
    mkdirSync(join(dir, 'config.json'));
    expect(() => readMeasuredRun(dir)).toThrow(/config\.json is not a regular file/);
  });
});

describe('the figures of a measured run', () => {
  it('are the harness\'s: TTFT and E2E from queued, TPOT over the gaps; ITL has its mean and no percentile', () => {
    const run = parseMeasuredRun(files({ requests: `${line({ output_toks: 3, queued_ts: 10, scheduled_ts: 10, first_token_ts: 10.1, last_token_ts: 10.5 })}\n${line({ request_id: 'b', arrival_time: 6, output_toks: 5, queued_ts: 11, scheduled_ts: 11, first_token_ts: 11.4, last_token_ts: 12.2 })}\n${line({ request_id: 'c', arrival_time: 7, output_toks: 1, queued_ts: 12, scheduled_ts: 12, first_token_ts: 12.3, last_token_ts: 12.3 })}` }));
    const f = measuredFigures(run.requests);
    expect(f.ttftMs.mean).toBeCloseTo((100 + 400 + 300) / 3, 2); // rounded to 1e-3 ms, as every figure
    expect(f.e2eMs.p50).toBeCloseTo(500, 6);
    expect(f.tpotMs.count).toBe(2); // the one-token request has no TPOT
    expect(f.tpotMs.mean).toBeCloseTo((200 + 200) / 2, 6);
    // ITL: (400 + 800) ms over (2 + 4) gaps, not the mean of the requests' means.
    expect(f.itlMs).toEqual({ count: 6, mean: 200, p50: null, p90: null, p95: null, p99: null });
  });

  it('replays each request with prompts no other shares, arriving as it was sent', () => {
    const run = readMeasuredRun('rtxpro6000-qwen3-32b');
    const t = runTrace(run);
    expect(t[0]!.timestamp).toBe(0);
    expect(t[1]!.timestamp).toBeCloseTo((run.requests[1]!.arrivalTime - run.requests[0]!.arrivalTime) * 1000, 9);
    const ids = t.flatMap((r) => [...r.hashIds]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(t.every((r, i) => r.inputLength === run.requests[i]!.inputTokens && r.hashIds.length === Math.ceil(r.inputLength / 512))).toBe(true);
  });
});

describe('validateRun', () => {
  const run = readMeasuredRun('rtxpro6000-llama-3.1-8b');

  it('says where each setting came from: meta.json, vLLM\'s default, a derived KV cache, the calibration', () => {
    const v = validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b' });
    const s = v.settings;
    expect(s.maxNumSeqs).toEqual({ value: 128, source: 'meta.json engine_kwargs.max_num_seqs' });
    expect(s.blockSize.source).toBe("vLLM's default (meta.json does not say)");
    expect(s.numBlocks.value).toBe(35810);
    expect(s.numBlocks.source).toMatch(/^derived \(meta\.json logs no num_gpu_blocks\): 0\.9 \(vLLM's default\) x 96\.00 GiB .* - 14\.96 GiB of weights - 1\.5 GiB of activations/);
    expect(s.cpuOverheadMs.source).toBe('the calibration shipped with profile rtxpro6000/llama-3.1-8b (docs/validation.md)');
    expect(s.timing).toBe(timingModel({ kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b' }).name);
    // A logged block count wins over the derivation; options win over both, and over the calibration.
    const logged = parseMeasuredRun(files({ meta: JSON.stringify({ ...meta, kv_cache: { num_gpu_blocks: 5000, block_size: 32 } }) }));
    const w = validateRun(logged, { profile: 'rtxpro6000/llama-3.1-8b', cpuOverheadMs: 2, calibration: false });
    expect(w.settings.numBlocks).toEqual({ value: 5000, source: 'meta.json kv_cache.num_gpu_blocks' });
    expect(w.settings.blockSize).toEqual({ value: 32, source: 'meta.json kv_cache.block_size' });
    expect(w.settings.cpuOverheadMs).toEqual({ value: 2, source: 'given (options.cpuOverheadMs)' });
    expect(w.settings.linkLatencyUs).toEqual({ value: 20, source: 'default (no calibration)' });
  });

  it('replays the run: every request served, and the same figures from the same inputs', () => {
    const a = validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b', calibration: false });
    expect(a.predicted.ttftMs.count).toBe(300);
    expect(a.replay).toMatchObject({ rejected: 0, truncated: 0, preemptions: 0 });
    expect(a.measured.itlMs.p99).toBeNull();
    expect(a.differencePct.itlMs.p99).toBeNull();
    expect(a.predicted.itlMs.count).toBe(a.measured.itlMs.count); // every gap of every request
    const b = validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b', calibration: false });
    expect(b.predicted).toEqual(a.predicted);
    // More overhead a step: every figure later.
    const slow = validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b', cpuOverheadMs: 1, calibration: false });
    expect(slow.predicted.tpotMs.mean).toBeGreaterThan(a.predicted.tpotMs.mean);
    expect(slow.predicted.ttftMs.mean).toBeGreaterThan(a.predicted.ttftMs.mean);
    // The series: every token and every prompt counted once.
    const gen = a.series.predicted.reduce((x, p) => x + p.genThroughput, 0);
    expect(gen).toBe(run.requests.reduce((x, r) => x + r.outputTokens, 0));
    expect(a.series.predicted.reduce((x, p) => x + p.promptThroughput, 0)).toBe(run.requests.reduce((x, r) => x + r.inputTokens, 0));
    expect(Math.max(...a.series.predicted.map((p) => p.running))).toBe(128);
  });

  it('says when the replay could not serve every request whole (a KV cache too small)', () => {
    const v = validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b', numBlocks: 200 });
    expect(v.replay.rejected + v.replay.truncated).toBeGreaterThan(0);
    expect(v.notes.some((n) => /^the replay could not serve \d+ of the 300 requests whole/.test(n))).toBe(true);
    expect(v.predicted.ttftMs.count).toBeLessThanOrEqual(300);
  });

  it('refuses options naming them, and a calibration of another GPU', () => {
    expect(() => validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b', numblocks: 4 } as never)).toThrow(/options: unknown option "numblocks"/);
    expect(() => validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b', numBlocks: 1 })).toThrow(/options\.numBlocks must be an integer >= 2, got 1/);
    expect(() => validateRun(run, { profile: 'rtxpro6000/llama-3.1-8b', tp: 3 })).toThrow(/has TP 1, 2, got 3/);
    const cal = readProfileBundle('rtxpro6000/llama-3.1-8b').calibration!;
    expect(() => validateRun(run, { profile: 'rtx4090/llama-3.1-8b', calibration: cal })).toThrow(/options\.calibration: fitted on RTXPRO6000, but profile rtx4090\/llama-3\.1-8b was measured on RTX4090/);
    expect(() => validateRun(run, { profile: 'h100/llama' })).toThrow(/options\.profile: profile "h100\/llama": no such preset or folder/);
    expect(() => validateRun({} as never, { profile: 'rtxpro6000/llama-3.1-8b' })).toThrow(/run must be a measured run/);
    // The run's own TP, which the profile was not measured at: said as the run's, not as an option given.
    const tp2 = parseMeasuredRun(files({ meta: JSON.stringify({ ...meta, engine_kwargs: { ...meta.engine_kwargs, tensor_parallel_size: 2 } }) }));
    expect(() => validateRun(tp2, { profile: 'rtx4090/llama-3.1-8b' })).toThrow(new RangeError('options.tp: the run ran at TP 2 (meta.json engine_kwargs.tensor_parallel_size), but profile rtx4090/llama-3.1-8b has TP 1: give options.tp to replay it at one of them, or a profile of that TP'));
    expect(validateRun(tp2, { profile: 'rtx4090/llama-3.1-8b', tp: 1 }).settings.tp).toEqual({ value: 1, source: 'given (options.tp)' });
    const noSeqs = parseMeasuredRun(files({ meta: JSON.stringify({ ...meta, engine_kwargs: { ...meta.engine_kwargs, max_num_seqs: undefined } }) }));
    expect(() => validateRun(noSeqs, { profile: 'rtxpro6000/llama-3.1-8b' })).toThrow(/run\/meta\.json: engine_kwargs\.max_num_seqs is missing; kvpool cannot know what the engine ran with/);
  });
});

describe('parseCalibration', () => {
  const good = readProfileBundle('rtxpro6000/qwen3-32b').calibration!;
  const with_ = (f: (c: Record<string, unknown>) => void) => {
    const c = JSON.parse(JSON.stringify(good)) as Record<string, unknown>;
    f(c);
    return c;
  };
  it('round-trips the shipped one and refuses each field, naming it', () => {
    expect(parseCalibration(JSON.stringify(good))).toEqual(good);
    expect(() => parseCalibration('{')).toThrow(/^calibration: not valid JSON/);
    expect(() => parseCalibration(with_((c) => (c['kind'] = 'x')))).toThrow(/calibration\.kind must be "kvpool-calibration", got "x"/);
    expect(() => parseCalibration(with_((c) => (c['version'] = 2)))).toThrow(/calibration\.version must be 1/);
    expect(() => parseCalibration(with_((c) => ((c['parameters'] as Record<string, unknown>)['cpuOverheadMs'] = -0.5)))).toThrow(/calibration\.parameters\.cpuOverheadMs must be a finite number >= 0, got -0\.5/);
    expect(() => parseCalibration(with_((c) => ((c['parameters'] as Record<string, unknown>)['linkGBps'] = 0)))).toThrow(/calibration\.parameters\.linkGBps must be a finite number > 0, got 0/);
    expect(() => parseCalibration(with_((c) => (c['fitted'] = ['speed'])))).toThrow(/calibration\.fitted must list some of cpuOverheadMs, linkLatencyUs, linkGBps/);
    expect(() => parseCalibration(with_((c) => (c['extra'] = 1)))).toThrow(/calibration\.extra is not a field of a calibration/);
    expect(() => parseCalibration(with_((c) => (((c['runs'] as Array<Record<string, unknown>>)[1]!['before'] as Record<string, unknown>)['tpotMs'] = { mean: 1 })))).toThrow(/calibration\.runs\[1\]\.before\.tpotMs\.p99 must be a number, got undefined/);
    expect(() => timingModel({ kind: 'profile', profile: 'rtxpro6000/qwen3-32b', calibration: { ...good, version: 3 } as never })).toThrow(/timing\.calibration\.version must be 1/);
  });

  it('parsePeerSummary reads the fifteen figures', () => {
    const p = parsePeerSummary('s', text('llmservingsim-summary.txt'));
    expect(p.predicted.ttftMs).toEqual({ mean: 6815.7, p50: 8633.9, p90: 16119.1, p95: 17961.4, p99: 19356.6 });
    expect(p.differencePct.tpotMs.p50).toBe(0);
  });
});
