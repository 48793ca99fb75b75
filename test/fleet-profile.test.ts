// A fleet timed by a GPU profile, with its KV cache in GiB (docs/timing.md,
// KV capacity; docs/fleet.md): the blocks a size in GiB or a share of GPU
// memory gives, echoed per engine in blocks and GiB; contradictory sizes
// refused naming both; `kvpool fleet --profile ... --kv-cache-gib` equal to
// fleet() with the same options; profile, TP and GiB as sweep axes, each
// point fleet()'s run; refusals naming the flag.

import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { fleetSweep, fleetSweepConfigurations } from '../bindings/node/fleet-sweep.js';
import '../bindings/node/profile-files.js';
import { readProfileBundle } from '../bindings/node/profile-files.js';
import { GPU_MEMORY_GIB, kvBytesPerToken, weightBytesPerGpu } from '../bindings/timing/kv-capacity.js';
import { capture } from './support/capture.js';
import { unknownGpuBundle } from './support/unknown-gpu-bundle.js';

const GIB = 2 ** 30;
const llama = readProfileBundle('rtxpro6000/llama-3.1-8b').model;
const base = { requests: 80, engines: 2, maxRunning: 8, scheduler: 'continuous' } as const;
const profile = { kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b' } as const;

describe('a fleet with a profile and its KV cache in GiB', () => {
  it('holds the blocks a size in GiB gives, and says so per engine in blocks and GiB', () => {
    const run = fleetSync({ ...base, dpSize: 2, timing: profile, kvCacheGib: 4 });
    // 4 GiB of 16-token blocks of 128 KiB per token: 2,048 blocks per rank.
    expect(run.config.numBlocks).toBe((4 * GIB) / (16 * kvBytesPerToken(llama)));
    expect(run.config).toMatchObject({ kvCacheGib: 4, kvBlocksPerEngine: 2 * 2048, kvGibPerEngine: 8, profile: 'rtxpro6000/llama-3.1-8b', tp: 1 });
    expect(run.config.timing).toMatch(/^profile rtxpro6000\/llama-3\.1-8b sha256:[0-9a-f]{12} tp 1/);
  });

  it('turns a share of GPU memory into what is left after the weights and activations', () => {
    const run = fleetSync({ ...base, timing: { ...profile, tp: 2 }, gpuMemoryUtilization: 0.9 });
    const free = 0.9 * GPU_MEMORY_GIB['RTXPRO6000']! * GIB - weightBytesPerGpu(llama, 2) - 1.5 * GIB;
    expect(run.config.numBlocks).toBe(Math.floor(free / (16 * kvBytesPerToken(llama, 2))));
    // Two GPUs per rank, each holding half of every block.
    expect(run.config.kvGibPerEngine).toBeCloseTo((2 * run.config.numBlocks * 16 * kvBytesPerToken(llama, 2)) / GIB, 3);
  });

  it('sizes by the polynomial\'s own bytes per token, and echoes the default 65,536 blocks as the 128 GiB they are', () => {
    expect(fleetSync({ requests: 10, timing: true, kvCacheGib: 2 }).config.numBlocks).toBe(1024);
    expect(fleetSync({ requests: 10, timing: true }).config).toMatchObject({ kvBlocksPerEngine: 65536, kvGibPerEngine: 128 });
  });

  it('warns when the blocks and the weights exceed the GPU, at the block where they do, and not for a size in memory', () => {
    // RTX 4090 (24 GiB) with Llama-3.1-8B: what fits beside the weights, in blocks of 16 tokens.
    const perBlock = 16 * kvBytesPerToken(llama);
    const fit = Math.floor((GPU_MEMORY_GIB['RTX4090']! * GIB - weightBytesPerGpu(llama, 1)) / perBlock);
    const gpu4090 = { kind: 'profile', profile: 'rtx4090/llama-3.1-8b' } as const;
    const kvNotes = (r: FleetRun) => r.warnings.filter((w) => w.includes('KV cache'));
    expect(kvNotes(fleetSync({ ...base, timing: gpu4090, numBlocks: fit }))).toEqual([]);
    const over = kvNotes(fleetSync({ ...base, timing: gpu4090, numBlocks: fit + 1 }));
    expect(over).toHaveLength(1);
    expect(over[0]).toContain(`at most ${fit.toLocaleString('en-US')} blocks would fit beside the weights`);
    expect(over[0]).toMatch(/more than the GPU's 24 GiB.*--kv-cache-gib, --gpu-memory-utilization/);
    // The default 65,536 blocks are 128 GiB: more than a 96 GiB RTX PRO 6000, on every dp rank's GPU.
    expect(kvNotes(fleetSync({ ...base, dpSize: 2, timing: profile }))).toHaveLength(1);
    expect(kvNotes(fleetSync({ ...base, timing: profile, gpuMemoryUtilization: 0.9 }))).toEqual([]);
    // TP 2 halves each GPU's share of a block: blocks that overflow one GPU fit on two.
    const fit2 = Math.floor((96 * GIB - weightBytesPerGpu(llama, 2)) / (16 * kvBytesPerToken(llama, 2)));
    expect(kvNotes(fleetSync({ ...base, timing: { ...profile, tp: 2 }, numBlocks: fit2 }))).toEqual([]);
    expect(kvNotes(fleetSync({ ...base, timing: { ...profile, tp: 2 }, numBlocks: fit2 + 1 }))).toHaveLength(1);
    // A model that knows no GPU says nothing.
    expect(kvNotes(fleetSync({ ...base, timing: true, numBlocks: 1 << 20 }))).toEqual([]);
  });

  it('refuses contradictory sizes, naming both, and a share of memory without a GPU', () => {
    expect(() => fleetSync({ ...base, timing: profile, numBlocks: 100, kvCacheGib: 4 })).toThrow(/options.numBlocks and options.kvCacheGib both size the KV cache: give one/);
    expect(() => fleetSync({ ...base, timing: profile, kvCacheGib: 4, gpuMemoryUtilization: 0.9 })).toThrow(/options.kvCacheGib and options.gpuMemoryUtilization both size the KV cache/);
    expect(() => fleetSync({ ...base, timing: true, gpuMemoryUtilization: 0.9 })).toThrow(/options.gpuMemoryUtilization: timing model polynomial does not know its GPU's memory and its weights/);
    expect(() => fleetSync({ requests: 10, kvCacheGib: 4 })).toThrow(/options.kvCacheGib applies to a timed fleet/);
    expect(() => fleetSync({ ...base, timing: { kind: 'profile', profile: 'rtxpro6000/qwen3-32b' }, gpuMemoryUtilization: 0.6 })).toThrow(/gpuMemoryUtilization 0.6 of 96 GiB leaves .* GiB for KV after 61.\d\d GiB of weights/);
  });
});

describe('a profile of a GPU kvpool does not know by name (H100)', () => {
  const { bundle } = unknownGpuBundle();
  const h100 = { kind: 'profile', profile: bundle } as const;
  // What 0.9 of 80 GiB leaves after Llama-3.1-8B's weights and the 1.5 GiB reserve, in blocks of 16 tokens.
  const blocksOf80 = Math.floor((0.9 * 80 * GIB - weightBytesPerGpu(llama, 1) - 1.5 * GIB) / (16 * kvBytesPerToken(llama)));

  it('sizes the cache by a share of memory once told the GPU\'s memory (timing.gpuMemoryGib), and asks for it in the library\'s words', () => {
    expect(() => fleetSync({ ...base, timing: h100, gpuMemoryUtilization: 0.9 })).toThrow(
      /^options\.gpuMemoryUtilization: profile .*H100.* was measured on H100, a GPU whose memory kvpool does not know: give it in GiB \(options\.timing\.gpuMemoryGib\), or size the KV cache by options\.kvCacheGib or options\.numBlocks$/,
    );
    const run = fleetSync({ ...base, timing: { ...h100, gpuMemoryGib: 80 }, gpuMemoryUtilization: 0.9 });
    expect(run.config.numBlocks).toBe(blocksOf80);
    expect(blocksOf80).toBeGreaterThan(20_000); // 52.5 GiB of 2 MiB blocks: the figure is not a degenerate one
  });

  const args = ['fleet', '--requests', '80', '--engines', '2', '--max-running', '8', '--scheduler', 'continuous', '--no-progress', '--json'];
  it('kvpool fleet --gpu-memory-gib is the profile\'s gpuMemoryGib; without it the refusal names the flag', async () => {
    const r = await capture(() => main([...args, '--profile', bundle, '--gpu-memory-gib', '80', '--gpu-memory-utilization', '0.9']));
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out).config.numBlocks).toBe(blocksOf80);
    const no = await capture(() => main([...args, '--profile', bundle, '--gpu-memory-utilization', '0.9']));
    expect(no.code).toBe(1);
    expect(no.err).toMatch(/--gpu-memory-utilization: profile .* was measured on H100, a GPU whose memory kvpool does not know: give it in GiB \(--gpu-memory-gib\), or size the KV cache by --kv-cache-gib or --num-blocks/);
    expect(no.err).not.toMatch(/options\.|timing\./);
    // A known GPU's nominal memory gives way to the flag: 80 of an RTX PRO 6000's 96 GiB.
    const known = await capture(() => main([...args, '--profile', 'rtxpro6000/llama-3.1-8b', '--gpu-memory-gib', '80', '--gpu-memory-utilization', '0.9']));
    expect(JSON.parse(known.out).config.numBlocks).toBe(blocksOf80);
  });

  it('kvpool sweep --gpu-memory-gib sizes each fleet the same way', async () => {
    const r = await capture(() => main(['sweep', '--profile', bundle, '--gpu-memory-gib', '80', '--gpu-memory-utilization', '0.8,0.9', '--requests', '40', '--engines', '1', '--scheduler', 'continuous', '--no-progress', '--workers', '1', '--format', 'json']));
    expect(r.code, r.err).toBe(0);
    const blocksOf = (u: number) => Math.floor((u * 80 * GIB - weightBytesPerGpu(llama, 1) - 1.5 * GIB) / (16 * kvBytesPerToken(llama)));
    expect((JSON.parse(r.out) as FleetRun[]).map((x) => x.config.numBlocks)).toEqual([blocksOf(0.8), blocksOf(0.9)]);
  }, 60_000);

  for (const cmd of [['fleet', '--timing', 'default'], ['sweep', '--timing', 'default'], ['sweep']]) {
    it(`kvpool ${cmd.join(' ')} refuses --gpu-memory-gib without --profile, naming the flag`, async () => {
      const r = await capture(() => main([...cmd, '--gpu-memory-gib', '80', '--requests', '10', '--no-progress']));
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/--gpu-memory-gib applies to --profile/);
    });
  }
});

describe('kvpool fleet --profile', () => {
  const args = ['fleet', '--requests', '80', '--engines', '2', '--max-running', '8', '--scheduler', 'continuous', '--no-progress', '--json'];
  const asJson = (r: FleetRun) => {
    const { requests: _r, ...latency } = r.latency!;
    return JSON.parse(JSON.stringify({ ...r, engines: r.engines.map(({ run: _run, ...e }) => e), latency }));
  };

  it('is fleet() with the profile spec its flags make', async () => {
    const r = await capture(() => main([...args, '--profile', 'rtxpro6000/llama-3.1-8b', '--tp', '2', '--cpu-overhead-ms', '0.9', '--link-latency-us', '10', '--link-gbps', '32', '--kv-cache-gib', '3']));
    expect(r.code, r.err).toBe(0);
    const lib = fleetSync({ ...base, timing: { ...profile, tp: 2, cpuOverheadMs: 0.9, linkLatencyUs: 10, linkGBps: 32 }, kvCacheGib: 3 });
    expect(JSON.parse(r.out)).toEqual(asJson(lib));
    expect(lib.config.timing).toContain('tp 2, cpu overhead 0.9 ms, link 10 us 32 GB/s');
  });

  it('prints the KV cache per engine in blocks and GiB', async () => {
    const r = await capture(() => main([...args.slice(0, -1), '--profile', 'rtx4090/llama-3.1-8b', '--gpu-memory-utilization', '0.9']));
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/GPU memory utilization 0\.9 · KV blocks per engine [\d]+ · KV GiB per engine [\d.]+/);
  });

  const refused: Array<[string[], RegExp]> = [
    [['--profile', 'rtxpro6000/qwen3-32b', '--tp', '4'], /--tp: profile rtxpro6000\/qwen3-32b has TP 1, 2, got 4/],
    [['--tp', '2', '--timing', 'default'], /--tp applies to --profile/],
    [['--profile', 'rtx4090/llama-3.1-8b', '--timing', 'default'], /--profile and --timing both choose the timing model: give one/],
    [['--profile', 'rtx4090/llama-3.1-8b', '--skew-fit'], /--skew-fit: profile rtx4090\/llama-3\.1-8b has no skew fit/],
    [['--profile', 'a100/llama'], /--profile: profile "a100\/llama": no such preset or folder/],
    [['--profile', 'rtx4090/llama-3.1-8b', '--num-blocks', '100', '--kv-cache-gib', '2'], /--num-blocks and --kv-cache-gib both size the KV cache: give one/],
    [['--profile', 'rtx4090/llama-3.1-8b', '--gpu-memory-utilization', '1.2'], /--gpu-memory-utilization must be in \(0, 1\], got "1.2"/],
    [['--profile', 'rtx4090/llama-3.1-8b', '--cpu-overhead-ms', '-1'], /--cpu-overhead-ms must be a number >= 0, got "-1"/],
    [['--profile', 'rtx4090/llama-3.1-8b', '--gpu-memory-gib', '0'], /--gpu-memory-gib must be a number > 0, got "0"/],
  ];
  for (const [flags, message] of refused) {
    it(`refuses ${flags.join(' ')} before reading a trace`, async () => {
      const r = await capture(() => main(['fleet', '/nonexistent.jsonl', ...flags]));
      expect(r.code).toBe(1);
      expect(r.err).toMatch(message);
      expect(r.err).not.toMatch(/nonexistent\.jsonl/);
    });
  }
});

describe('profiles in a sweep', () => {
  it('vary the profile, its TP and the GiB, each point fleet()\'s run', async () => {
    const grid = { profile: ['rtxpro6000/llama-3.1-8b', 'rtxpro6000/qwen3-32b'], tp: [1, 2], kvCacheGib: [2, 6], engines: [2] };
    const opts = { ...base, timing: { ...profile, cpuOverheadMs: 0.5 } };
    const configs = fleetSweepConfigurations(opts, grid);
    expect(configs.map((c) => `${(c.timing as { profile: string }).profile} ${(c.timing as { tp: number }).tp} ${c.kvCacheGib}`)).toEqual([
      'rtxpro6000/llama-3.1-8b 1 2', 'rtxpro6000/llama-3.1-8b 1 6', 'rtxpro6000/llama-3.1-8b 2 2', 'rtxpro6000/llama-3.1-8b 2 6',
      'rtxpro6000/qwen3-32b 1 2', 'rtxpro6000/qwen3-32b 1 6', 'rtxpro6000/qwen3-32b 2 2', 'rtxpro6000/qwen3-32b 2 6',
    ]);
    const runs = await fleetSweep({ ...opts, grid, workers: 2, perRequest: true });
    const strip = (r: FleetRun) => ({ ...r, engines: r.engines.map((e) => ({ ...e, run: { ...e.run, seconds: 0, allocateCallsPerSecond: 0 } })) });
    runs.forEach((r, i) => expect(strip(r)).toEqual(strip(fleetSync(configs[i]!))));
    expect(runs.map((r) => `${r.config.profile} ${r.config.tp} ${r.config.kvCacheGib}`)).toEqual(configs.map((c) => `${(c.timing as { profile: string }).profile} ${(c.timing as { tp: number }).tp} ${c.kvCacheGib}`));
    expect(() => fleetSweepConfigurations({ timing: true }, { tp: [1, 2] })).toThrow(/grid.tp varies a GPU profile: give options.timing of kind "profile" \(or grid.profile\)/);
  }, 120_000);

  it('kvpool sweep --profile a,b --tp 1,2 prints them as columns', async () => {
    const r = await capture(() => main(['sweep', '--profile', 'rtxpro6000/llama-3.1-8b,rtxpro6000/qwen3-32b', '--tp', '1,2', '--kv-cache-gib', '2', '--requests', '60', '--engines', '1', '--scheduler', 'continuous', '--no-progress', '--workers', '2']));
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^\s+profile\s+tp\s+router/m);
    expect(r.out).toMatch(/rtxpro6000\/qwen3-32b\s+2\s+round-robin/);
  }, 120_000);
});
