// `kvpool validate RUN --profile NAME`: a measured run replayed with a GPU
// profile, its TTFT, TPOT, ITL and E2E set against the run's
// (docs/validation.md); `--json` the same as data, `--report` a page of
// charts. The run is a folder in the measured-run format or the name of a
// shipped run.

import { Command } from 'commander';
import { readMeasuredRun, MEASURED_RUNS } from '../node/measured-files.js';
import { PROFILE_PRESETS } from '../node/profile-files.js';
import { writeValidationReport } from '../node/validation-report.js';
import { validateRun, type ValidateOptions } from '../measured/validate-run.js';
import { calibrationOf } from './timing-flags.js';
import { nonNegativeNumber, parseIntArg, positiveNumber } from './options.js';
import { formatValidation, validationJson } from './validate-format.js';

interface ValidateFlags {
  profile: string;
  tp?: number;
  calibration?: string;
  cpuOverheadMs?: number;
  linkLatencyUs?: number;
  linkGbps?: number;
  skewFit?: boolean;
  gpuMemoryGib?: number;
  numBlocks?: number;
  json: boolean;
  report?: string;
}

/** The flags of a profile as validateRun takes them; the calibration file read, refusals naming the flag. */
export function validateOptionsOf(f: Omit<ValidateFlags, 'json' | 'report'>): ValidateOptions {
  return {
    profile: f.profile,
    ...(f.tp !== undefined && { tp: f.tp }),
    ...(f.calibration !== undefined && { calibration: calibrationOf(f.calibration), ...(f.calibration !== 'none' && { calibrationName: f.calibration }) }),
    ...(f.cpuOverheadMs !== undefined && { cpuOverheadMs: f.cpuOverheadMs }),
    ...(f.linkLatencyUs !== undefined && { linkLatencyUs: f.linkLatencyUs }),
    ...(f.linkGbps !== undefined && { linkGBps: f.linkGbps }),
    ...(f.skewFit === true && { skew: true }),
    ...(f.gpuMemoryGib !== undefined && { gpuMemoryGib: f.gpuMemoryGib }),
    ...(f.numBlocks !== undefined && { numBlocks: f.numBlocks }),
  };
}

/** The flags validate and calibrate share: the profile and what no table knows. */
export function addValidationProfileOptions(cmd: Command, what: string): Command {
  return cmd
    .requiredOption('--profile <name|dir>', `the GPU profile ${what}: a preset (${Object.keys(PROFILE_PRESETS).join(', ')}) or a profile bundle folder (docs/timing.md)`)
    .option('--tp <n>', "tensor-parallel GPUs (default: the run's tensor_parallel_size)", (v: string) => parseIntArg('--tp', 1, v))
    .option('--skew-fit', "blend decode attention toward the longest context by the profile's skew fit");
}

export function validateCommand(): Command {
  const cmd = new Command('validate')
    .description('replay a measured vLLM run with a GPU profile and compare its TTFT, TPOT, ITL and end-to-end latency with the measured ones (docs/validation.md)')
    .argument('<run>', `a run folder (meta.json, requests.jsonl, timeseries.csv) or a shipped run: ${Object.keys(MEASURED_RUNS).join(', ')}`);
  addValidationProfileOptions(cmd, 'to time the replay with');
  cmd
    .option('--calibration <file|none>', 'the overhead and link fitted by kvpool calibrate; none: no calibration (no overhead, the default link); default: the one the profile ships with (the RTX PRO 6000 presets), if any')
    .option('--cpu-overhead-ms <ms>', 'CPU time added to every step, ms (wins over the calibration)', nonNegativeNumber('--cpu-overhead-ms'))
    .option('--link-latency-us <us>', 'latency of one hop of a collective between GPUs, us (wins over the calibration)', nonNegativeNumber('--link-latency-us'))
    .option('--link-gbps <GB/s>', 'bandwidth of the link between GPUs, GB/s (wins over the calibration)', positiveNumber('--link-gbps'))
    .option('--gpu-memory-gib <GiB>', "one GPU's memory in GiB, when the KV cache is derived (the run logs no num_gpu_blocks); wins over the run's logged memory and the profile GPU's nominal one (needed for a GPU kvpool does not know)", positiveNumber('--gpu-memory-gib'))
    .option('--num-blocks <n>', "KV blocks per dp rank, in place of the run's logged or derived count", (v: string) => parseIntArg('--num-blocks', 2, v))
    .option('--json', 'print the comparison as JSON: { measured, predicted, differencePct, settings, ... }', false)
    .option('--report <file.html>', 'also write a page of charts: TTFT per request over arrival time, and running, waiting and throughput per second, predicted over measured')
    .addHelpText('after', [
      '',
      'Measured figures follow the run\'s harness: TTFT = first token - queued, E2E = last token - queued,',
      'TPOT = (last - first) / (tokens - 1); percentiles as numpy\'s. A run records only each request\'s first',
      'and last token, so its ITL has a mean and no percentile. The replay takes TP, DP, expert parallelism,',
      'max_num_seqs, max_num_batched_tokens and num_gpu_blocks from meta.json (the KV cache is derived from the',
      'GPU\'s memory when the run did not log it) and says where each setting came from.',
    ].join('\n'))
    .action(async (run: string, o: ValidateFlags) => {
      if (o.report !== undefined && !/\.html?$/i.test(o.report)) throw new Error(`--report ${JSON.stringify(o.report)}: the report is an .html page`);
      const options = validateOptionsOf(o);
      const measured = readMeasuredRun(run);
      const v = validateRun(measured, options);
      if (o.report !== undefined) await writeValidationReport(o.report, v);
      process.stdout.write(o.json ? `${JSON.stringify(validationJson(v))}\n` : formatValidation(v));
    });
  return cmd;
}
