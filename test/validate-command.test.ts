// `kvpool validate` and `kvpool calibrate` as a user meets them: the JSON is
// the library's comparison, the table says every setting's source and the
// peer's figures, the report draws its charts, a calibration written by
// calibrate is read back by validate and fleet, and refusals name the flag.

import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { readMeasuredRun, validateRun, readCalibrationFile, fleetSync } from '../bindings/index.node.js';
import { capture } from './support/capture.js';
import { unknownGpuBundle } from './support/unknown-gpu-bundle.js';
import { readProfileBundle } from '../bindings/node/profile-files.js';
import { kvBytesPerToken, weightBytesPerGpu } from '../bindings/timing/kv-capacity.js';

const LLAMA = 'rtxpro6000-llama-3.1-8b';
const tmp = () => mkdtempSync(join(tmpdir(), 'kvpool-validate-'));

describe('kvpool validate', () => {
  it('--json gives the library\'s comparison: measured, predicted (mean, p50, p90, p95, p99 of each figure), the settings and their sources', async () => {
    const r = await capture(() => main(['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--json']));
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out);
    const lib = validateRun(readMeasuredRun(LLAMA), { profile: 'rtxpro6000/llama-3.1-8b' });
    expect(obj.predicted).toEqual(lib.predicted);
    expect(obj.measured).toEqual(JSON.parse(JSON.stringify(lib.measured)));
    for (const k of ['ttftMs', 'tpotMs', 'itlMs', 'e2eMs']) expect(Object.keys(obj.predicted[k])).toEqual(['count', 'mean', 'p50', 'p90', 'p95', 'p99']);
    expect(obj.measured.itlMs.p99).toBeNull();
    expect(obj.settings.maxNumBatchedTokens).toEqual({ value: 2048, source: 'meta.json engine_kwargs.max_num_batched_tokens' });
    expect(obj.settings.engine).toBe('vllm');
    expect(obj.peer.simulator).toBe('LLMServingSim');
    expect(obj.perRequest).toBeUndefined();
  });

  it('prints the table with the sources, the peer beside kvpool, and what cannot be compared', async () => {
    const r = await capture(() => main(['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--calibration', 'none']));
    expect(r.code).toBe(0);
    expect(r.out).toContain('kvpool validate: rtxpro6000-llama-3.1-8b, 300 requests of meta-llama/Llama-3.1-8B');
    expect(r.out).toContain('cpu overhead 0 ms (default (no calibration))');
    expect(r.out).toMatch(/TTFT\s+mean\s+7,097\.2\s+6,556\.6\s+-7\.62\s+6,815\.7\s+-4\.0/);
    expect(r.out).toMatch(/ITL\s+mean\s+32\.4\s+31\.5\s+-2\.79\s+-\s+-/);
    expect(r.out).toMatch(/\n\s+p99\s+-\s+107\.5\s+-/);
    expect(r.out).toContain('note: measured ITL: the run records only the first and the last token');
  });

  it('--report writes a page with the TTFT and time-series charts, predicted over measured, and the table', async () => {
    const file = join(tmp(), 'run.html');
    const r = await capture(() => main(['validate', 'rtxpro6000-qwen3-32b', '--profile', 'rtxpro6000/qwen3-32b', '--report', file]));
    expect(r.code).toBe(0);
    const html = readFileSync(file, 'utf8');
    for (const id of ['ttft', 'running', 'waiting', 'prompt-throughput', 'gen-throughput']) expect(html).toContain(`<section id="${id}">`);
    expect((html.match(/<svg/g) ?? []).length).toBe(5);
    expect(html).toContain('aria-label="arrival (s after the first): ');
    expect(html).toMatch(/<td data-key="kvpool" data-value="[0-9.]+">/);
    expect(html).not.toMatch(/<script/);
  }, 60_000);

  it('--gpu-memory-gib gives the GPU memory the KV cache is derived from: a GPU kvpool does not know, or another size of one it does', async () => {
    // The run logs no num_gpu_blocks nor the device's memory: its cache is derived from the GPU's.
    const llama = readProfileBundle('rtxpro6000/llama-3.1-8b').model;
    const blocksOf80 = Math.floor((0.9 * 80 * 2 ** 30 - weightBytesPerGpu(llama, 1) - 1.5 * 2 ** 30) / (16 * kvBytesPerToken(llama)));
    const { bundle } = unknownGpuBundle();
    const no = await capture(() => main(['validate', LLAMA, '--profile', bundle]));
    expect(no.code).toBe(1);
    expect(no.err).toMatch(/was measured on H100, a GPU whose memory kvpool does not know: give it in GiB \(--gpu-memory-gib\)/);
    for (const profile of [bundle, 'rtxpro6000/llama-3.1-8b']) {
      const r = await capture(() => main(['validate', LLAMA, '--profile', profile, '--gpu-memory-gib', '80', '--json']));
      expect(r.code, r.err).toBe(0);
      const blocks = JSON.parse(r.out).settings.numBlocks;
      expect(blocks.value).toBe(blocksOf80);
      expect(blocks.source).toContain('x 80.00 GiB (given as options.gpuMemoryGib)');
    }
    expect(validateRun(readMeasuredRun(LLAMA), { profile: bundle, gpuMemoryGib: 80 }).settings.numBlocks.value).toBe(blocksOf80);
    // The refusal's other way out, --num-blocks, is a flag of validate too.
    expect(no.err).toMatch(/or the KV cache \(--num-blocks\)/);
    const given = await capture(() => main(['validate', LLAMA, '--profile', bundle, '--num-blocks', '20000', '--json']));
    expect(given.code, given.err).toBe(0);
    expect(JSON.parse(given.out).settings.numBlocks).toEqual({ value: 20000, source: 'given (options.numBlocks)' });
  });

  it('refuses, naming the flag', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['validate', LLAMA], /required option '--profile <name\|dir>' not specified/],
      [['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--report', 'x.txt'], /--report "x\.txt": the report is an \.html page/],
      [['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--calibration', 'nope.json'], /--calibration nope\.json: no such file/],
      [['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--tp', '0'], /--tp must be >= 1, got 0/],
      [['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--gpu-memory-gib', '-80'], /--gpu-memory-gib must be a number > 0, got "-80"/],
      [['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--num-blocks', '1'], /--num-blocks must be >= 2, got 1/],
      [['validate', 'nowhere', '--profile', 'rtxpro6000/llama-3.1-8b'], /run "nowhere": no such folder/],
      [['validate', LLAMA, '--profile', 'h100/llama'], /^kvpool: --profile: profile "h100\/llama": no such preset or folder/],
      [['validate', 'rtxpro6000-qwen3-32b', '--profile', 'rtx4090/llama-3.1-8b'], /^kvpool: --tp: the run ran at TP 2 \(meta\.json engine_kwargs\.tensor_parallel_size\), but profile rtx4090\/llama-3\.1-8b has TP 1: give --tp to replay it/],
      [['validate', 'rtxpro6000-qwen3-32b', '--profile', 'rtxpro6000/qwen3-32b', '--tp', '4'], /^kvpool: --tp: profile rtxpro6000\/qwen3-32b has TP 1, 2, got 4/],
      [['validate', LLAMA, '--profile', 'rtx4090/llama-3.1-8b', '--calibration', join(import.meta.dirname, '../profiles/RTXPRO6000/calibration.json')], /^kvpool: --calibration: fitted on RTXPRO6000, but profile rtx4090\/llama-3\.1-8b was measured on RTX4090/],
    ];
    for (const [args, message] of cases) {
      const r = await capture(() => main(args));
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.err, args.join(' ')).toMatch(message);
    }
  });
});

describe('kvpool calibrate', () => {
  it('--gpu-memory-gib and --num-blocks size a run\'s KV cache as validate\'s do: a GPU kvpool does not know can be calibrated', async () => {
    const { bundle } = unknownGpuBundle();
    const no = await capture(() => main(['calibrate', LLAMA, '--profile', bundle, '--no-progress']));
    expect(no.code).toBe(1);
    expect(no.err).toMatch(/a GPU whose memory kvpool does not know: give it in GiB \(--gpu-memory-gib\)/);
    // 96 GiB is the RTX PRO 6000's nominal memory, which the preset of the same tables derives the run's cache from: the same fit.
    const h100 = await capture(() => main(['calibrate', LLAMA, '--profile', bundle, '--gpu-memory-gib', '96', '--json', '--no-progress']));
    expect(h100.code, h100.err).toBe(0);
    const preset = await capture(() => main(['calibrate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--json', '--no-progress']));
    const a = JSON.parse(h100.out);
    const b = JSON.parse(preset.out);
    expect(a.hardware).toBe('H100');
    expect(a.parameters).toEqual(b.parameters);
    expect(a.runs[0].after).toEqual(b.runs[0].after);
    // --num-blocks: the cache given, whatever the GPU.
    const blocks = await capture(() => main(['calibrate', LLAMA, '--profile', bundle, '--num-blocks', '35810', '--json', '--no-progress']));
    expect(blocks.code, blocks.err).toBe(0);
    expect(JSON.parse(blocks.out).runs[0].after).toEqual(b.runs[0].after);
    const twice = await capture(() => main(['calibrate', LLAMA, '--profile', bundle, '--gpu-memory-gib', '96', '--gpu-memory-gib', '80', '--no-progress']));
    expect(twice.code).toBe(1);
    expect(twice.err).toMatch(/--gpu-memory-gib is given 2 times for 1 runs/);
  }, 60_000);

  it('writes a calibration that validate and fleet read back, with what it fitted and why', async () => {
    const file = join(tmp(), 'llama.json');
    const r = await capture(() => main(['calibrate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--out', file, '--no-progress']));
    expect(r.code).toBe(0);
    expect(existsSync(file)).toBe(true);
    const c = readCalibrationFile(file);
    expect(c.fitted).toEqual(['cpuOverheadMs']);
    expect(c.runs[0]!.before.ttftMs.mean).toBe(-7.62);
    expect(Math.abs(c.runs[0]!.after.ttftMs.mean)).toBeLessThan(2);
    expect(r.out).toContain(`cpu overhead ${c.parameters.cpuOverheadMs} ms, link latency 20 us, link bandwidth 16 GB/s (fitted: cpuOverheadMs)`);
    expect(r.out).toContain("note: no run's GPUs talk to each other");
    const v = await capture(() => main(['validate', LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--calibration', file, '--json']));
    const obj = JSON.parse(v.out);
    expect(obj.settings.cpuOverheadMs).toEqual({ value: c.parameters.cpuOverheadMs, source: `calibration ${file}` });
    expect(obj.differencePct.ttftMs.mean).toBe(c.runs[0]!.after.ttftMs.mean);
    // fleet takes it as the profile's parameters.
    const f = await capture(() => main(['fleet', '--requests', '40', '--engines', '1', '--profile', 'rtxpro6000/llama-3.1-8b', '--calibration', file, '--scheduler', 'continuous', '--json', '--no-progress']));
    expect(f.code).toBe(0);
    expect(JSON.parse(f.out).config.timing).toContain(`cpu overhead ${c.parameters.cpuOverheadMs} ms, link 20 us 16 GB/s`);
    const lib = fleetSync({ requests: 40, engines: 1, scheduler: 'continuous', timing: { kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b', calibration: c } });
    expect(JSON.parse(f.out).latency.ttftMs).toEqual(lib.latency!.ttftMs);
  }, 60_000);

  it('needs one profile for every run or one per run, each of its run\'s model, on one GPU', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['calibrate', LLAMA, 'rtxpro6000-qwen3-32b', '--profile', 'a', '--profile', 'b', '--profile', 'c'], /--profile is given 3 times for 2 runs: give it once \(for every run\) or once per run, in the runs' order/],
      [['calibrate', LLAMA, 'rtxpro6000-qwen3-32b', '--profile', 'rtxpro6000/qwen3-32b', '--profile', 'rtxpro6000/llama-3.1-8b'], /runs\[0\]: run rtxpro6000-llama-3\.1-8b served meta-llama\/Llama-3\.1-8B, but profile rtxpro6000\/qwen3-32b was measured with Qwen\/Qwen3-32B/],
      [['calibrate', 'rtxpro6000-qwen3-32b', '--profile', 'rtx4090/llama-3.1-8b'], /^kvpool: --tp \(run rtxpro6000-qwen3-32b\): the run ran at TP 2 \(meta\.json engine_kwargs\.tensor_parallel_size\), but profile rtx4090\/llama-3\.1-8b has TP 1/],
      [['calibrate', 'rtxpro6000-qwen3-32b', '--profile', 'rtxpro6000/qwen3-32b', '--tp', '3'], /^kvpool: --tp \(run rtxpro6000-qwen3-32b\): profile rtxpro6000\/qwen3-32b has TP 1, 2, got 3/],
      [['calibrate', LLAMA, '--profile', 'h100/llama'], /^kvpool: --profile \(run rtxpro6000-llama-3\.1-8b\): profile "h100\/llama": no such preset or folder/],
      [['calibrate', LLAMA, LLAMA, '--profile', 'rtxpro6000/llama-3.1-8b', '--profile', 'rtx4090/llama-3.1-8b'], /a calibration is for one GPU; profile rtxpro6000\/llama-3\.1-8b is RTXPRO6000, profile rtx4090\/llama-3\.1-8b is RTX4090/],
    ];
    for (const [args, message] of cases) {
      const r = await capture(() => main([...args, '--no-progress']));
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.err, args.join(' ')).toMatch(message);
    }
  });

  it('kvpool --help lists validate and calibrate', async () => {
    const r = await capture(() => main(['--help']));
    expect(r.out).toMatch(/validate \[options\] <run>/);
    expect(r.out).toMatch(/calibrate \[options\] <runs\.\.\.>/);
  });
});
