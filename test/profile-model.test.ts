// The profile model (docs/timing.md, the profile model): the same
// microseconds as the Python prototype it was checked against, for the same
// batches (test/fixtures/profile-oracle.json, recorded from it); where it
// differs on purpose, the difference as documented; the bundle read alike
// from the shipped presets (gzipped), a folder of one's own, or texts; KV
// capacity from the model's config; and its refusals.

import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { PROFILE_PRESETS, readProfileBundle, readProfileDir } from '../bindings/node/profile-files.js';
import { GPU_MEMORY_GIB, kvBytesPerToken, kvCacheBlocks, parameterCount, weightBytesPerGpu } from '../bindings/timing/kv-capacity.js';
import { parseProfileBundle } from '../bindings/timing/profile-bundle.js';
import { setProfileReader } from '../bindings/timing/profile-source.js';
import { addChunk, addDecode, emptyStepBatch, timingModel, type StepBatch, type TimingModel } from '../bindings/timing/timing-model.js';

const ROOT = new URL('../', import.meta.url).pathname;
const PRESETS = join(ROOT, 'profiles');

interface OracleCase {
  case: string;
  profile: string;
  tp: number;
  dpRanks: number;
  params?: Record<string, number | boolean>;
  chunks: Array<[number, number, number]>;
  decodes: Array<[number, number]>;
  us: number;
}

function batchOf(chunks: ReadonlyArray<readonly number[]>, decodes: ReadonlyArray<readonly number[]> = [], dpRanks = 1): StepBatch {
  const b = emptyStepBatch();
  b.dpRanks = dpRanks;
  for (const [t, h, r] of chunks) addChunk(b, t!, h!, r ?? 0);
  for (const [k, r] of decodes) addDecode(b, k!, r ?? 0);
  return b;
}

/** A bundle of one dense op `x` (the given dense.csv rows) with no attention time and one layer. */
function toyBundle(dense: string) {
  return parseProfileBundle({
    meta: 'model: toy\narchitecture: toy\nhardware: TOY\nattention_grid:\n  chunks: 0, 16-32 x2\n  n_decode: 0, 1-2 x2\n',
    model: JSON.stringify({ hidden_size: 8, num_attention_heads: 1, num_key_value_heads: 1, num_hidden_layers: 1, vocab_size: 10, intermediate_size: 8 }),
    architecture: 'sequence:\n  prologue: []\n  pre_attn: [x, attention]\n  post_attn: []\n  mlp_dense: []\n  mlp_moe: []\n  head: [s]\n',
    tp: {
      1: {
        'dense.csv': `layer,tokens,time_us\n${dense}`,
        'per_sequence.csv': 'layer,sequences,time_us\ns,1,0\n',
        'attention.csv': 'prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,1,16,0\n0,0,2,16,0\n16,0,0,0,0\n32,0,0,0,0\n',
      },
    },
  });
}

// Uncalibrated unless a test says otherwise: the RTX PRO 6000 presets ship a calibration
// (docs/validation.md), and what these tests check is the tables' composition.
const model = (profile: string, more: Record<string, unknown> = {}): TimingModel => timingModel({ kind: 'profile', profile, calibration: false, ...more });

describe('the profile model against the prototype it was checked with', () => {
  const oracle = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/profile-oracle.json'), 'utf8')) as { cases: OracleCase[] };

  it('covers prefill, decode, mixed, chunked, TP2, the skew fit, MoE and DP with expert parallelism', () => {
    const names = oracle.cases.map((c) => c.case).join('\n');
    for (const what of ['prefill only', 'decode only', 'mixed', 'chunked with context', 'TP2', 'skew fit', 'MoE', 'DP2 + EP', 'DP4 + EP']) expect(names).toContain(what);
    expect(new Set(oracle.cases.map((c) => c.profile))).toEqual(new Set(Object.keys(PROFILE_PRESETS)));
  });

  for (const c of oracle.cases) {
    it(`gives the same microseconds: ${c.case}`, () => {
      // The prototype's parameters are its own (no overhead, its default link, unless the case says): no calibration.
      const m = timingModel({ kind: 'profile', profile: c.profile, tp: c.tp, calibration: false, ...c.params });
      const us = m.stepMs(batchOf(c.chunks, c.decodes, c.dpRanks)) * 1000;
      expect(Math.abs(us - c.us) / c.us).toBeLessThan(1e-9);
    });
  }
});

describe('where it differs from the prototype on purpose (docs/timing.md)', () => {
  const m = model('rtxpro6000/llama-3.1-8b');

  it('continues past the measured tokens along the top octave, not the last segment (the last 16 tokens are noise)', () => {
    // A one-op bundle whose op doubles from 1,024 to 2,048 tokens but is flat over its last 16.
    const toy = toyBundle('x,1,1\nx,1024,1024\nx,2032,2048\nx,2048,2048\n');
    const m = timingModel({ kind: 'profile', profile: toy });
    expect(m.stepMs(batchOf([[2048, 0]]))).toBeCloseTo(2.048, 12);
    expect(m.stepMs(batchOf([[3000, 0]]))).toBeCloseTo(3.0, 12); // 2,048 us + 952 x 1 us
    expect(m.stepMs(batchOf([[4096, 0]]))).toBeCloseTo(4.096, 12);
    // Inside, linear between points; below the first, the first.
    expect(m.stepMs(batchOf([[2040, 0]]))).toBeCloseTo(2.048, 12);
    expect(m.stepMs(batchOf([[512, 0]]))).toBeCloseTo((1 + (511 * 1023) / 1023) / 1000, 12);
    // A decode step grows with its sequences past the 256 measured.
    const decodes = (n: number) => batchOf([], Array.from({ length: n }, () => [100]));
    const real = model('rtxpro6000/llama-3.1-8b');
    expect(real.stepMs(decodes(512))).toBeGreaterThan(real.stepMs(decodes(256)));
  });

  it('times a chunk longer than the grid as pieces of it after growing history: one prompt costs the same in one chunk or two', () => {
    const whole = m.stepMs(batchOf([[6000, 0]]));
    const first = m.stepMs(batchOf([[2048, 0]]));
    const rest = m.stepMs(batchOf([[3952, 2048]]));
    // The same attention either way; the second way pays a second step's fixed costs.
    expect(first + rest).toBeGreaterThan(whole);
    expect(whole).toBeGreaterThan(m.stepMs(batchOf([[4000, 0]])));
  });

  it('extends a prefill row past the last decode count it measured instead of falling to 0', () => {
    // No prefill was profiled beside 256 decodes; the prototype's corner of 0 halves the attention at 192.
    const at = (n: number) => m.stepMs(batchOf([[512, 0]], Array.from({ length: n }, () => [2000])));
    expect(at(192)).toBeGreaterThan(at(128));
    expect(at(256)).toBeGreaterThan(at(192));
  });

  it('charges several prompts no attention between them: two long-context chunks cost less than one chunk of their sums', () => {
    const two = m.stepMs(batchOf([[1024, 8192], [1024, 8192]]));
    const summed = m.stepMs(batchOf([[2048, 16384]]));
    expect(two).toBeLessThan(summed);
  });
});

describe('the bundle', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** The preset as a folder of one's own: uncompressed, with models/ and architectures/ two levels up. */
  function unpacked(preset: string): string {
    const root = mkdtempSync(join(tmpdir(), 'kvpool-profile-'));
    dirs.push(root);
    const src = join(PRESETS, PROFILE_PRESETS[preset]!);
    const dst = join(root, 'bundles', 'mine');
    const copy = (from: string, to: string) => {
      mkdirSync(to, { recursive: true });
      for (const e of readdirSync(from)) {
        const f = join(from, e);
        if (statSync(f).isDirectory()) copy(f, join(to, e));
        else if (e.endsWith('.gz')) writeFileSync(join(to, e.slice(0, -3)), gunzipSync(readFileSync(f)));
        else writeFileSync(join(to, e), readFileSync(f));
      }
    };
    copy(src, dst);
    copy(join(PRESETS, 'models'), join(root, 'models'));
    copy(join(PRESETS, 'architectures'), join(root, 'architectures'));
    return dst;
  }

  it('reads the same from a preset, an uncompressed folder and texts, with the same content hash in the name', () => {
    const preset = readProfileBundle('rtxpro6000/qwen3-30b-a3b');
    const dir = unpacked('rtxpro6000/qwen3-30b-a3b');
    const own = readProfileBundle(dir);
    expect(own.sha256).toBe(preset.sha256);
    const text = (p: string) => readFileSync(join(dir, p), 'utf8');
    const tp = (d: number) => Object.fromEntries(readdirSync(join(dir, `tp${d}`)).map((f) => [f, text(`tp${d}/${f}`)]));
    const parsed = parseProfileBundle({
      meta: text('meta.yaml'),
      model: readFileSync(join(dir, '../../models/Qwen/Qwen3-30B-A3B-Instruct-2507.json'), 'utf8'),
      architecture: readFileSync(join(dir, '../../architectures/qwen3_moe.yaml'), 'utf8'),
      tp: { 1: tp(1), 2: tp(2) },
    });
    expect(parsed.sha256).toBe(preset.sha256);
    const b = batchOf([[333, 4000]], [[1500], [2500]]);
    // The preset ships its GPU's calibration (profiles/RTXPRO6000/calibration.json); the copies hold the tables alone.
    expect(preset.calibration?.hardware).toBe('RTXPRO6000');
    expect(own.calibration).toBeUndefined();
    const ms = timingModel({ kind: 'profile', profile: preset, calibration: false }).stepMs(b);
    expect(timingModel({ kind: 'profile', profile: dir }).stepMs(b)).toBe(ms);
    expect(timingModel({ kind: 'profile', profile: parsed }).stepMs(b)).toBe(ms);
    expect(timingModel({ kind: 'profile', profile: preset }).stepMs(b)).toBeCloseTo(ms + preset.calibration!.parameters.cpuOverheadMs, 9);
    expect(model('rtxpro6000/qwen3-30b-a3b').name).toBe(`profile rtxpro6000/qwen3-30b-a3b sha256:${preset.sha256.slice(0, 12)} tp 1, cpu overhead 0 ms, link 20 us 16 GB/s`);
    // A bundle parsed elsewhere can be sent to a worker thread.
    expect(structuredClone(parsed).sha256).toBe(parsed.sha256);
  });

  it('names what a different bundle or different parameters made', () => {
    const names = new Set(Object.keys(PROFILE_PRESETS).map((p) => model(p).name));
    expect(names.size).toBe(4);
    const a = model('rtxpro6000/llama-3.1-8b', { tp: 2, cpuOverheadMs: 0.9, linkLatencyUs: 10, skew: true }).name;
    expect(a).toMatch(/^profile rtxpro6000\/llama-3\.1-8b sha256:[0-9a-f]{12} tp 2, cpu overhead 0\.9 ms, link 10 us 16 GB\/s, skew fit$/);
  });

  it('refuses, naming the field, file and line', () => {
    expect(() => model('rtxpro6000/llama-3.1-8b', { tp: 4 })).toThrow(/timing\.tp: profile rtxpro6000\/llama-3\.1-8b has TP 1, 2, got 4/);
    expect(() => model('rtx4090/llama-3.1-8b', { skew: true })).toThrow(/timing\.skew: profile rtx4090\/llama-3\.1-8b has no skew fit/);
    expect(() => model('h100/llama')).toThrow(/profile "h100\/llama": no such preset or folder \(presets: rtx4090\/llama-3\.1-8b/);
    expect(() => model('rtxpro6000/llama-3.1-8b', { cpuOverheadMs: -1 })).toThrow(/timing\.cpuOverheadMs must be a finite number >= 0, got -1/);
    expect(() => model('rtxpro6000/llama-3.1-8b', { linkGBps: 0 })).toThrow(/timing\.linkGBps must be a finite number > 0/);
    expect(() => model('rtxpro6000/llama-3.1-8b', { tpSize: 2 })).toThrow(/unknown option "tpSize"/);
    expect(() => timingModel({ kind: 'profile' } as never)).toThrow(/timing\.profile is required/);
    const dir = unpacked('rtxpro6000/llama-3.1-8b');
    const dense = join(dir, 'tp1/dense.csv');
    const lines = readFileSync(dense, 'utf8').split('\n');
    lines[6] = 'qkv_proj,ten,35.8';
    writeFileSync(dense, lines.join('\n'));
    // A TP folder's tables are parsed, and checked, when first read: by a model of that TP, or reading bundle.tp[d].
    const bundle = readProfileBundle(dir);
    expect(() => bundle.tp[1]).toThrow(/tp1\/dense\.csv line 7: tokens must be an integer >= 1, got "ten"/);
    expect(() => model(dir, { tp: 1 })).toThrow(/tp1\/dense\.csv line 7: tokens must be an integer >= 1, got "ten"/);
    expect(bundle.tp[2]!.attention.pc.length).toBeGreaterThan(2); // the other folder is sound
    writeFileSync(dense, 'layer,time_us\n');
    expect(() => readProfileBundle(dir).tp[1]).toThrow(/tp1\/dense\.csv line 1: the header must be "layer,tokens,time_us"/);
    rmSync(dense);
    expect(() => readProfileBundle(dir)).toThrow(/tp1\/dense\.csv is missing/);
    expect(() => readProfileBundle(join(dir, 'tp1'))).toThrow(/has no meta\.yaml/);
  });

  it('parses a TP folder when it is first read, and stays plain data to a copy', () => {
    const b = readProfileDir(unpacked('rtxpro6000/llama-3.1-8b'), 'copy');
    const copy = structuredClone(b);
    expect(Object.getOwnPropertyDescriptor(copy.tp, 1)!.get).toBeUndefined(); // a copy holds the tables themselves
    expect(copy.tp[2]!.attention.pc).toEqual(b.tp[2]!.attention.pc);
    expect(copy.tp[1]!.skew!.alphaDefault).toBe(b.tp[1]!.skew!.alphaDefault);
    expect(JSON.parse(JSON.stringify(b)).tp[1].dense.qkv_proj).toEqual(JSON.parse(JSON.stringify(b.tp[1]!.dense.qkv_proj)));
    // The same tables as a model of the folder reads.
    expect(timingModel({ kind: 'profile', profile: copy, calibration: false }).stepMs(batchOf([[512, 0, 0]]))).toBe(model('rtxpro6000/llama-3.1-8b').stepMs(batchOf([[512, 0, 0]])));
  });

  it('in a runtime without files, takes a parsed bundle and says so of a name', () => {
    setProfileReader(undefined);
    try {
      expect(() => model('rtxpro6000/llama-3.1-8b')).toThrow(/read from files, in Node only; elsewhere pass parseProfileBundle\(\)'s bundle/);
    } finally {
      setProfileReader(readProfileBundle);
    }
  });

  it('refuses a batch built from sums alone, or naming a rank it does not have', () => {
    const m = model('rtxpro6000/llama-3.1-8b');
    expect(() => m.stepMs({ ...emptyStepBatch(), prefillTokens: 100, prefillSeqs: 1 })).toThrow(/prefillSeqs is 1 but chunkTokens.*build a batch with addChunk and addDecode/);
    expect(() => m.stepMs(batchOf([[10, 0, 1]]))).toThrow(/batch\.chunkRanks\[0\] must be a rank in \[0, 0\], got 1/);
  });
});

describe('KV capacity from the model (docs/timing.md, KV capacity)', () => {
  const llama = readProfileBundle('rtxpro6000/llama-3.1-8b').model;
  const qwen = readProfileBundle('rtxpro6000/qwen3-32b').model;
  const moe = readProfileBundle('rtxpro6000/qwen3-30b-a3b').model;

  it('counts K and V of every layer, the KV heads split over TP', () => {
    // Llama-3.1-8B: 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes.
    expect(kvBytesPerToken(llama)).toBe(32 * 8 * 128 * 2 * 2);
    expect(kvBytesPerToken(llama, 2)).toBe(32 * 4 * 128 * 2 * 2);
    // Qwen3-32B: 64 layers x 8 KV heads; Qwen3-30B-A3B: 48 layers x 4.
    expect(kvBytesPerToken(qwen)).toBe(64 * 8 * 128 * 2 * 2);
    expect(kvBytesPerToken(moe)).toBe(48 * 4 * 128 * 2 * 2);
  });

  it('counts the weights as the models are published (8.03B, 32.8B, 30.5B parameters)', () => {
    const total = (m: typeof llama) => parameterCount(m)[0] + parameterCount(m)[1];
    expect(total(llama) / 8.03e9).toBeCloseTo(1, 2);
    expect(total(qwen) / 32.8e9).toBeCloseTo(1, 2);
    expect(total(moe) / 30.5e9).toBeCloseTo(1, 2);
    // A MoE engine of two dp ranks holds half the experts on each GPU.
    expect(weightBytesPerGpu(moe, 1, 2)).toBeLessThan(0.55 * weightBytesPerGpu(moe, 1, 1));
    expect(weightBytesPerGpu(llama, 2)).toBe(weightBytesPerGpu(llama) / 2);
  });

  it('turns GiB, or a share of the GPU less weights and activations, into whole blocks', () => {
    // 10 GiB of 2 MiB blocks (16 tokens of 128 KiB).
    expect(kvCacheBlocks({ bytesPerToken: kvBytesPerToken(llama), blockSize: 16, kvCacheGib: 10 })).toEqual({ blocks: 5120, gibPerGpu: 10, availableGib: 10 });
    const w = weightBytesPerGpu(llama);
    const got = kvCacheBlocks({ bytesPerToken: kvBytesPerToken(llama), blockSize: 16, gpuMemoryUtilization: 0.9, gpuMemoryGib: GPU_MEMORY_GIB['RTXPRO6000'], weightBytes: w });
    expect(got.availableGib).toBeCloseTo(0.9 * 96 - w / 2 ** 30 - 1.5, 9);
    expect(got.blocks).toBe(Math.floor((got.availableGib * 2 ** 30) / (2 * 2 ** 20)));
    expect(() => kvCacheBlocks({ bytesPerToken: kvBytesPerToken(qwen), blockSize: 16, gpuMemoryUtilization: 0.9, gpuMemoryGib: 24, weightBytes: weightBytesPerGpu(qwen) })).toThrow(/gpuMemoryUtilization 0\.9 of 24 GiB leaves -\d+\.\d+ GiB for KV after 61\.\d\d GiB of weights/);
    expect(() => kvCacheBlocks({ bytesPerToken: 1, blockSize: 16, kvCacheGib: 1, gpuMemoryUtilization: 0.9 })).toThrow(/kvCacheGib and gpuMemoryUtilization both size the KV cache/);
    expect(() => kvCacheBlocks({ bytesPerToken: 1, blockSize: 16, gpuMemoryUtilization: 1.5, gpuMemoryGib: 24 })).toThrow(/gpuMemoryUtilization must be in \(0, 1\], got 1\.5/);
  });

  it('is what a profile model tells a fleet: bytes per token on a GPU, the GPU, the weights', () => {
    const m = model('rtxpro6000/qwen3-32b', { tp: 2 });
    expect(m.kv).toMatchObject({ bytesPerToken: kvBytesPerToken(qwen, 2), gpusPerRank: 2, gpuBytes: 96 * 2 ** 30 });
    expect(m.kv!.weightBytes!(1)).toBe(weightBytesPerGpu(qwen, 2));
    expect(model('rtxpro6000/qwen3-32b', { gpuMemoryGib: 95.6 }).kv!.gpuBytes).toBe(95.6 * 2 ** 30);
  });
});
