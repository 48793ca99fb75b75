// `kvpool calibrate RUN... --profile NAME [--out FILE]`: fits the per-step
// CPU overhead and the link between GPUs to measured runs of one GPU and
// writes the calibration that `--calibration FILE` reads back
// (docs/validation.md, calibrating). One --profile for every run, or one
// per run in order (runs of different models need their own profiles).

import { Command } from 'commander';
import { calibrate } from '../measured/calibrate.js';
import { readMeasuredRun, MEASURED_RUNS } from '../node/measured-files.js';
import { PROFILE_PRESETS } from '../node/profile-files.js';
import { writeCalibrationFile } from '../node/calibration-file.js';
import type { Calibration } from '../timing/calibration.js';
import { restated } from '../validate.js';
import { parseIntArg, positiveNumber } from './options.js';
import { packageVersion } from './version.js';
import { progressBar } from './progress-bar.js';

interface CalibrateFlags {
  profile: string[];
  tp?: number[];
  gpuMemoryGib?: number[];
  numBlocks?: number[];
  skewFit?: boolean;
  out?: string;
  json: boolean;
  progress: boolean;
}

const collect = (parse: (v: string) => unknown) => (v: string, prev: unknown[] | undefined) => [...(prev ?? []), parse(v)];

/** Each run's value of a flag given once (for all) or once per run. */
function perRun<T>(flag: string, values: readonly T[] | undefined, runs: number): Array<T | undefined> {
  if (values === undefined) return Array.from({ length: runs }, () => undefined);
  if (values.length === 1) return Array.from({ length: runs }, () => values[0]);
  if (values.length !== runs) throw new Error(`${flag} is given ${values.length} times for ${runs} runs: give it once (for every run) or once per run, in the runs' order`);
  return [...values];
}

/** The library names a run's profile and TP `runs[i].profile`, `runs[i].tp`; here they are flags (given once, or once per run). */
function runFlags(e: unknown, runs: readonly string[]): unknown {
  if (!(e instanceof Error)) return e;
  const message = e.message.replace(/runs\[(\d+)\]\.(profile|tp)\b/g, (_, i: string, k: string) => `--${k} (run ${runs[Number(i)] ?? i})`);
  return message === e.message ? e : restated(e, message);
}

function pct(x: number): string {
  return `${x > 0 ? '+' : ''}${x.toFixed(2)}`;
}

/** The calibration for people. */
export function formatCalibration(c: Calibration, out: string | undefined): string {
  const p = c.parameters;
  const lines = [
    `kvpool calibrate: ${c.runs.length} run${c.runs.length > 1 ? 's' : ''} of ${c.hardware} (replayed with engine ${c.engine})`,
    `  cpu overhead ${p.cpuOverheadMs} ms, link latency ${p.linkLatencyUs} us, link bandwidth ${p.linkGBps} GB/s (fitted: ${c.fitted.join(', ')})`,
    '',
    '  error % (predicted - measured) / measured, before (no overhead, default link) -> after',
  ];
  for (const r of c.runs) {
    const f = (k: 'ttftMs' | 'tpotMs' | 'e2eMs', s: 'mean' | 'p99') => `${pct(r.before[k][s])} -> ${pct(r.after[k][s])}`;
    lines.push(`  ${r.run} (${r.profile}, TP ${r.tp}):`);
    lines.push(`    TTFT mean ${f('ttftMs', 'mean')}, p99 ${f('ttftMs', 'p99')}; TPOT mean ${f('tpotMs', 'mean')}, p99 ${f('tpotMs', 'p99')}; E2E mean ${f('e2eMs', 'mean')}, p99 ${f('e2eMs', 'p99')}`);
  }
  lines.push('');
  for (const n of c.notes) lines.push(`  note: ${n}`);
  if (out !== undefined) lines.push('', `  written to ${out}: pass it back with --calibration ${out} (validate, fleet, sweep)`);
  return lines.join('\n') + '\n';
}

export function calibrateCommand(): Command {
  const cmd = new Command('calibrate')
    .description('fit the per-step CPU overhead and the link between GPUs (latency, bandwidth) to measured vLLM runs of one GPU, and write a calibration for --calibration (docs/validation.md)')
    .argument('<runs...>', `run folders (meta.json, requests.jsonl, timeseries.csv) or shipped runs: ${Object.keys(MEASURED_RUNS).join(', ')}`)
    .requiredOption('--profile <name|dir>', `the GPU profile of the runs' model: once for every run, or once per run in order; a preset (${Object.keys(PROFILE_PRESETS).join(', ')}) or a bundle folder`, collect((v) => v))
    .option('--tp <n>', "tensor-parallel GPUs, once or once per run (default: each run's tensor_parallel_size)", collect((v) => parseIntArg('--tp', 1, v)))
    .option('--gpu-memory-gib <GiB>', "one GPU's memory in GiB, once or once per run, when a run's KV cache is derived (it logs no num_gpu_blocks): needed for a GPU kvpool does not know", collect(positiveNumber('--gpu-memory-gib')))
    .option('--num-blocks <n>', "KV blocks per dp rank, once or once per run, in place of a run's logged or derived count", collect((v) => parseIntArg('--num-blocks', 2, v)))
    .option('--skew-fit', "blend decode attention toward the longest context by the profiles' skew fit")
    .option('--out <file.json>', 'write the calibration here (JSON, docs/validation.md); without it the calibration is printed')
    .option('--json', 'print the calibration as JSON (as --out writes it)', false)
    .option('--no-progress', 'no progress bar (there is one only when stderr is a terminal)')
    .action((runs: string[], o: CalibrateFlags) => {
      const profiles = perRun('--profile', o.profile, runs.length);
      const tps = perRun('--tp', o.tp, runs.length);
      const gibs = perRun('--gpu-memory-gib', o.gpuMemoryGib, runs.length);
      const blocks = perRun('--num-blocks', o.numBlocks, runs.length);
      const measured = runs.map((r) => readMeasuredRun(r));
      const bar = o.progress && process.stderr.isTTY ? progressBar('calibrate [{bar}] {value} replays | best worst error {best} % | {duration}s') : null;
      const max = 160;
      bar?.start(max, 0, { best: '-' });
      let c: Calibration;
      try {
        c = calibrate(
          measured.map((run, i) => ({
            run, profile: profiles[i]!,
            ...(tps[i] !== undefined && { tp: tps[i] }),
            ...(gibs[i] !== undefined && { gpuMemoryGib: gibs[i] }),
            ...(blocks[i] !== undefined && { numBlocks: blocks[i] }),
          })),
          { ...(o.skewFit === true && { skew: true }), maxEvaluations: max, kvpoolVersion: packageVersion(), onProgress: (n, best) => bar?.update(n, { best: best.toFixed(2) }) },
        );
      } catch (e) {
        throw runFlags(e, runs);
      } finally {
        bar?.stop();
      }
      if (o.out !== undefined) writeCalibrationFile(o.out, c);
      process.stdout.write(o.json ? `${JSON.stringify(c, null, 2)}\n` : formatCalibration(c, o.out));
    });
  return cmd;
}
