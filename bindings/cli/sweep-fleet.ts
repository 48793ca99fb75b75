// `kvpool sweep --router ... --engines ...`: every grid point a fleet of
// engines behind a router (docs/sweep.md, fleets). Its own table (the
// fleet's figures), the fleet's CSV/JSON, and the fleet report.

import { InvalidArgumentError, Option, type Command } from 'commander';
import type { FleetArrival } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { ROUTER_POLICIES, type RouterPolicy } from '../fleet/routers.js';
import { latencyFigures, latencyP99, writeFleetReport, type FleetVaried } from '../node/fleet-report.js';
import { groupWarnings } from '../node/report.js';
import { configValue, fleetSweep, TIMED_GRID_KEYS, type FleetSweepGrid } from '../node/fleet-sweep.js';
import { sloGroupLabel } from '../node/fleet-report.js';
import { FLEET_SCHEDULERS, type FleetScheduler } from '../fleet/timed-options.js';
import type { SloTargets } from '../fleet/slo-search.js';
import { ms, sweepSloAnswers, sweepSloJson, sweepSloLine, type SweepSloAnswer } from '../fleet/slo-answer.js';
import { noFleetReason } from '../fleet/slo-floor.js';
import { readTraceFile } from '../node/trace-file.js';
import { generateWorkload } from '../replay/workload.js';
import { timingModel, type TimingSpecInput } from '../timing/timing-model.js';
import { checkSloTimed, profileOf, SLO_FLAGS, sloOf, timingOf } from './timing-flags.js';
import { PROFILE_PRESETS } from '../node/profile-files.js';
import type { ReplayOptions } from '../replay/replay.js';
import { SWEEP_GRID_KEYS, type SweepGrid } from '../node/sweep.js';
import { routers } from './fleet-command.js';
import { fleetJson, formatFleetCsv } from './fleet-format.js';
import { fleetFieldLines } from './fleet-glossary.js';
import { columnWidths, fixed, percent, ranges, type OutputFormat } from './format.js';
import { nonNegativeNumber, parseIntArg, positiveNumber } from './options.js';
import { didYouMean } from './did-you-mean.js';
import { warn } from './replay-command.js';
import { sweepProgressBar } from './sweep-progress.js';
import { interruptible } from './interrupt.js';
import { ENGINES, type Engine } from '../engines/replay.js';
import { refuseVllmSwitches, refuseXllmFlags } from './vllm-replay-command.js';

export interface SweepFleetFlags {
  engine?: Engine[];
  maxNumSeqs?: number[];
  numGpuBlocksOverride?: number[];
  longPrefillTokenThreshold?: number;
  schedulerReserveFullIsl: boolean;
  router?: RouterPolicy[];
  engines?: number[];
  timing?: string;
  profile?: string[];
  tp?: number[];
  cpuOverheadMs?: number;
  linkLatencyUs?: number;
  linkGbps?: number;
  skewFit?: boolean;
  calibration?: string;
  gpuMemoryGib?: number;
  kvCacheGib?: number[];
  gpuMemoryUtilization?: number[];
  scheduler?: FleetScheduler[];
  maxNumBatchedTokens?: number[];
  speedup?: number[];
  concurrency?: number[];
  sloTtftMs?: number;
  sloTpotMs?: number;
  sloItlMs?: number;
  stepMs?: number;
  arrival?: FleetArrival;
  prefixWeight?: number;
  loadWeight?: number;
  affinityBlocks?: number;
}

const FLEET_ONLY = ['stepMs', 'arrival', 'prefixWeight', 'loadWeight', 'affinityBlocks'] as const;
/** Flags that ask for (timed) fleets by themselves. */
const TIMED_FLAGS = ['timing', 'profile', 'gpuMemoryGib', 'kvCacheGib', 'gpuMemoryUtilization', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency', 'sloTtftMs', 'sloTpotMs', 'sloItlMs'] as const;

const list = <T>(parse: (x: string) => T) => (v: string) => v.split(',').map((x) => parse(x.trim()));

/** The fleet axes and the fleet's fixed options; none has a default, so a plain sweep is told apart by their absence. */
export function addSweepFleetOptions(cmd: Command): Command {
  return cmd
    .option('--engine <list>', `fleets: engines to compare, ${ENGINES.join(' and/or ')} (docs/engines.md): each fleet's engines are of one kind; every grid point becomes a fleet (default xllm)`, list((x) => {
      if (!(ENGINES as readonly string[]).includes(x)) throw new InvalidArgumentError(`--engine must be among ${ENGINES.join(', ')}, got ${JSON.stringify(x)}${didYouMean(x, ENGINES)}`);
      return x as Engine;
    }))
    .option('--max-num-seqs <list>', "vLLM's name of --max-running (either engine)", list((x) => parseIntArg('--max-num-seqs', 1, x)))
    .option('--num-gpu-blocks-override <list>', "vLLM's name of --num-blocks (either engine)", list((x) => parseIntArg('--num-gpu-blocks-override', 2, x)))
    .option('--long-prefill-token-threshold <n>', "fleets of --engine vllm: a prefill's tokens per step at most (default 0: no cap)", (v: string) => parseIntArg('--long-prefill-token-threshold', 0, v))
    .option('--no-scheduler-reserve-full-isl', "fleets of --engine vllm: admit a request when its first chunk fits, not only when all its tokens do (vLLM's scheduler_reserve_full_isl, on by default)")
    .addOption(new Option('--router <list>', `fleets: routing policies to compare (${ROUTER_POLICIES.join(', ')}); every grid point becomes a fleet (default router round-robin)`).argParser(routers))
    .option('--engines <list>', 'fleets: fleet sizes to compare (default 4)', (v: string) => v.split(',').map((x) => parseIntArg('--engines', 1, x.trim())))
    .option('--step-ms <ms>', 'fleets: milliseconds of trace time per step (default 20)', positiveNumber('--step-ms'))
    .addOption(new Option('--arrival <how>', 'fleets: timestamps or instant (default timestamps)').choices(['timestamps', 'instant']))
    .option('--prefix-weight <n>', 'fleets, prefix routers: weight of the matched share (default 1)', (v: string) => parseIntArg('--prefix-weight', 0, v))
    .option('--load-weight <n>', 'fleets, prefix routers: weight of the load share (default 1)', (v: string) => parseIntArg('--load-weight', 0, v))
    .option('--affinity-blocks <n>', 'fleets, session affinity: hash the key of this block (default 1)', (v: string) => parseIntArg('--affinity-blocks', 1, v))
    .option('--timing <file|default>', 'timed fleets: keep time in milliseconds: "default" (the built-in polynomial) or a profiled table (.json or .csv) or a timing spec (docs/fleet-time.md)')
    .option('--profile <list>', `timed fleets: GPU profiles to compare, presets (${Object.keys(PROFILE_PRESETS).join(', ')}) or profile bundle folders (docs/timing.md)`, list((x) => x))
    .option('--tp <list>', "timed fleets, --profile: tensor-parallel degrees to compare (each one of the profile's TP folders)", list((x) => parseIntArg('--tp', 1, x)))
    .option('--cpu-overhead-ms <ms>', 'timed fleets, --profile: CPU time added to every step, ms (default 0)', nonNegativeNumber('--cpu-overhead-ms'))
    .option('--link-latency-us <us>', 'timed fleets, --profile: latency of one hop of a collective, us (default 20)', nonNegativeNumber('--link-latency-us'))
    .option('--link-gbps <GB/s>', 'timed fleets, --profile: link bandwidth between GPUs, GB/s (default 16)', positiveNumber('--link-gbps'))
    .option('--skew-fit', "timed fleets, --profile: blend decode attention toward the longest context by the profile's skew fit")
    .option('--calibration <file|none>', 'timed fleets, --profile: the overhead and link fitted by kvpool calibrate (docs/validation.md); none: no calibration; default: the one the profile ships with, if any')
    .option('--gpu-memory-gib <GiB>', "timed fleets, --profile: one GPU's memory in GiB, for --gpu-memory-utilization (default: the nominal memory of the profile's GPU, when kvpool knows it)", positiveNumber('--gpu-memory-gib'))
    .option('--kv-cache-gib <list>', 'timed fleets: KV caches of each GPU in GiB to compare, in place of --num-blocks', list((x) => positiveNumber('--kv-cache-gib')(x)))
    .option('--gpu-memory-utilization <list>', "timed fleets, --profile: shares of each GPU's memory to compare (vLLM's), in place of --num-blocks", list((x) => {
      const n = positiveNumber('--gpu-memory-utilization')(x);
      if (n > 1) throw new InvalidArgumentError(`--gpu-memory-utilization must be in (0, 1], got ${JSON.stringify(x)}`);
      return n;
    }))
    .option('--scheduler <list>', `timed fleets: schedulers to compare (${FLEET_SCHEDULERS.join(', ')}; continuous is timed even without --timing)`, list((x) => {
      if (!(FLEET_SCHEDULERS as readonly string[]).includes(x)) throw new InvalidArgumentError(`--scheduler must be among ${FLEET_SCHEDULERS.join(', ')}, got ${JSON.stringify(x)}${didYouMean(x, FLEET_SCHEDULERS)}`);
      return x as FleetScheduler;
    }))
    .option('--max-num-batched-tokens <list>', 'timed fleets with scheduler continuous, and fleets of --engine vllm: token budgets per step to compare (default 8192)', list((x) => parseIntArg('--max-num-batched-tokens', 1, x)))
    .option('--speedup <list>', 'timed fleets: arrival speed-ups to compare (request r arrives at its timestamp / x; default 1)', list((x) => positiveNumber('--speedup')(x)))
    .option('--concurrency <list>', 'timed fleets: closed-loop concurrencies to compare (n requests in flight, timestamps ignored)', list((x) => parseIntArg('--concurrency', 1, x)))
    .option('--slo-ttft-ms <ms>', `timed fleets: per router, the smallest fleet (fewest engines, then fewest blocks) whose p99 ${SLO_FLAGS[0].what} is at most ms; a line in the report's charts`, positiveNumber('--slo-ttft-ms'))
    .option('--slo-tpot-ms <ms>', `timed fleets: the same for the p99 ${SLO_FLAGS[1].what}`, positiveNumber('--slo-tpot-ms'))
    .option('--slo-itl-ms <ms>', `timed fleets: the same for the p99 ${SLO_FLAGS[2].what}`, positiveNumber('--slo-itl-ms'));
}

/** `--help` text of `kvpool sweep` for fleet sweeps: each row is a fleet, with the fleet's fields (those of `kvpool fleet --help`). */
export function sweepFleetGlossaryHelp(): string {
  return ['', 'With --router, --engines or --engine every grid point is a fleet, and the result fields are the fleet\'s:', ...fleetFieldLines(),
    'The configuration (`config`) then has the fleet\'s options too. Details: docs/fleet.md, docs/sweep.md.',
    '', 'Engines (--engine, an axis; docs/engines.md): xllm (default) is xLLM\'s pool under the replay kernel, with every replay',
    'mode and --scheduler continuous; vllm is vLLM v1\'s scheduler and block pool, exactly, with --max-num-batched-tokens',
    '(an axis, default 8192), --max-num-seqs, --long-prefill-token-threshold and --no-scheduler-reserve-full-isl.',
    '--engine xllm,vllm compares them: an engine column, a report panel and an SLO answer per engine. Choose vllm to plan',
    'a vLLM fleet; a flag one of the engines listed does not take is refused.'].join('\n');
}

/** Whether the flags ask for fleets; the fleet-only flags alone are a mistake, not a plain sweep. */
export function isFleetSweep(o: SweepFleetFlags): boolean {
  if (o.router !== undefined || o.engines !== undefined || o.engine !== undefined || TIMED_FLAGS.some((k) => o[k] !== undefined)) return true;
  const stray = FLEET_ONLY.filter((k) => o[k] !== undefined);
  if (stray.length > 0) throw new Error(`--${stray[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies to fleets: give --router or --engines too`);
  return false;
}

/** The SLO targets, refused unless every fleet of the sweep is timed (a step-clock fleet has no milliseconds). */
function sweepSlo(o: SweepFleetFlags): SloTargets | undefined {
  const slo = sloOf(o);
  const everyTimed = o.timing !== undefined || o.profile !== undefined || (o.scheduler?.every((s) => s === 'continuous') ?? false);
  checkSloTimed(slo, everyTimed);
  return slo;
}

/** Columns: the varied replay options, router, engines, then the fleet figures (timed: queueing labelled in engine steps, the p99 latencies in ms). */
export function formatFleetSweepTable(runs: readonly FleetRun[], varied: FleetVaried): string {
  const flag = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const timed = runs.some((r) => r.latency !== undefined);
  const figures = latencyFigures(runs);
  const latency = (r: FleetRun) => [...figures.map((c) => latencyP99(r, c.figure)), r.latency?.outputTokensPerSecond ?? null].map((v) => (v === null ? '-' : ms(v)));
  // Queueing counts engine steps on either clock (on the millisecond clock beside columns of ms): the heads say so.
  const queue = ['queue mean (steps)', 'queue p99 (steps)'];
  const head = [...varied.map(flag), 'hit rate', ...queue, 'imbalance', 'rejected', ...(timed ? [...figures.map((c) => `${c.short} p99 ms`), 'output tok/s'] : [])];
  const rows = runs.map((r) => [
    ...varied.map((k) => String(configValue(r.config, k))),
    percent(r.hitRate),
    fixed(r.queueing.meanSteps, 2),
    r.queueing.p99Steps.toLocaleString('en-US'),
    r.loadImbalance.toFixed(3),
    r.rejected.toLocaleString('en-US'),
    ...(timed ? latency(r) : []),
  ]);
  const w = columnWidths(head, rows);
  const line = (cells: string[]) => cells.map((x, c) => (varied[c] === 'router' ? x.padEnd(w[c]!) : x.padStart(w[c]!))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

/** The answers, each that none met with the reason when the trace and the model alone show that none can (slo-floor.ts). */
async function withReasons(answers: SweepSloAnswer[], o: Flags, timing: true | TimingSpecInput | undefined, slo: SloTargets): Promise<SweepSloAnswer[]> {
  if (slo.ttftMs === undefined || answers.every((a) => a.met !== null)) return answers;
  // One model judges every answer: none when the profile or its TP is an axis of the sweep.
  if ((o.profile?.length ?? 0) > 1 || (o.tp?.length ?? 0) > 1) return answers;
  const model = timingModel(typeof timing === 'object' ? timing : undefined);
  const limit = answers.reduce((m, a) => Math.max(m, a.largest.requests), 0);
  const file = o.trace !== undefined ? await readTraceFile(o.trace, limit) : undefined;
  return answers.map((a) => {
    if (a.met !== null) return a;
    const c = a.largest.config;
    const why = noFleetReason(a.largest, file ?? generateWorkload({ requests: c.requests ?? undefined, seed: c.seed }), model, slo);
    return why === undefined ? a : { ...a, why };
  });
}

type Flags = SweepFleetFlags & { trace?: string; requests: number; format: OutputFormat; workers?: number; report?: string; progress: boolean };

/**
 * The engine axis's options (`base` and `grid` changed in place): with the
 * vllm engine among the engines the xllm engine's flags are refused and the
 * defaults this command filled in for them dropped; with the xllm engine
 * among them the vllm engine's switches are refused (docs/sweep.md, engines).
 */
function engineAxis(o: Flags, grid: SweepGrid, base: Record<string, unknown>, cmd: Command): void {
  const engines = o.engine ?? ['xllm'];
  if (engines.includes('xllm')) refuseVllmSwitches(cmd);
  if (!engines.includes('vllm')) return;
  refuseXllmFlags(cmd);
  delete grid.eviction;
  delete base['publishAfterPrefill'];
  if (o.longPrefillTokenThreshold !== undefined) base['longPrefillTokenThreshold'] = o.longPrefillTokenThreshold;
  if (!o.schedulerReserveFullIsl) base['schedulerReserveFullIsl'] = false;
}

/** The fleet sweep: runs it, prints it, writes the report. */
export async function fleetSweepCommand(o: Flags, grid: SweepGrid, base: Omit<ReplayOptions, 'onProgress' | 'trace'>, cmd: Command): Promise<void> {
  engineAxis(o, grid, base as Record<string, unknown>, cmd);
  const slo = sweepSlo(o);
  // One profile spec for the sweep (checked now, the flags named); --profile and --tp are its axes.
  const { kvCacheGib: _gib, gpuMemoryUtilization: _util, ...flags } = o;
  const profile = profileOf({ ...flags, profile: o.profile?.[0], tp: o.tp?.[0] });
  const timedAxes: FleetSweepGrid = {
    ...(o.profile !== undefined && { profile: o.profile }),
    ...(o.tp !== undefined && { tp: o.tp }),
    ...(o.kvCacheGib !== undefined && { kvCacheGib: o.kvCacheGib }),
    ...(o.gpuMemoryUtilization !== undefined && { gpuMemoryUtilization: o.gpuMemoryUtilization }),
    ...(o.scheduler !== undefined && { scheduler: o.scheduler }),
    ...(o.maxNumBatchedTokens !== undefined && { maxNumBatchedTokens: o.maxNumBatchedTokens }),
    ...(o.speedup !== undefined && { speedup: o.speedup }),
    ...(o.concurrency !== undefined && { concurrency: o.concurrency }),
  };
  const fleetGrid: FleetSweepGrid = { ...grid, ...(o.engine !== undefined && { engine: o.engine }), ...timedAxes, engines: o.engines ?? [4], router: o.router ?? ['round-robin'] };
  const timing = o.timing !== undefined ? timingOf(o.timing) : undefined; // read once
  const total = Object.values(fleetGrid).reduce((a, v) => a * (v as unknown[]).length, 1);
  const bar = sweepProgressBar(o.progress, total, 'fleets');
  let runs: FleetRun[];
  try {
    runs = await interruptible(bar.stop, () => fleetSweep({
      ...base,
      ...(o.stepMs !== undefined && { stepMs: o.stepMs }),
      ...(o.arrival !== undefined && { arrival: o.arrival }),
      ...(o.prefixWeight !== undefined && { prefixWeight: o.prefixWeight }),
      ...(o.loadWeight !== undefined && { loadWeight: o.loadWeight }),
      ...(o.affinityBlocks !== undefined && { affinityBlocks: o.affinityBlocks }),
      ...(timing !== undefined && { timing }),
      ...(profile !== undefined && { timing: profile }),
      ...(o.trace !== undefined && { trace: o.trace }),
      grid: fleetGrid,
      ...(o.workers !== undefined && { workers: o.workers }),
      onProgress: bar.onProgress,
    }));
  } finally {
    bar.stop();
  }
  // Router and engines are always columns: they name the fleet.
  const varied: FleetVaried = [
    ...SWEEP_GRID_KEYS.filter((k) => (grid[k]?.length ?? 0) > 1),
    ...((o.engine?.length ?? 0) > 1 ? ['engine' as const] : []),
    ...TIMED_GRID_KEYS.filter((k) => (timedAxes[k]?.length ?? 0) > 1),
    'router',
    'engines',
  ];
  const answers = slo === undefined ? [] : await withReasons(sweepSloAnswers(runs, slo, (r) => sloGroupLabel(r, varied)), o, timing ?? profile, slo);
  const lines = slo === undefined ? [] : answers.map((a) => sweepSloLine(a, slo));
  if (o.format === 'table') {
    const what = o.trace ?? `built-in workload (${o.requests} requests)`;
    process.stdout.write(`kvpool sweep: ${what}, ${runs.length} fleets\n${formatFleetSweepTable(runs, varied)}\n${lines.map((l) => `\n${l}`).join('')}${lines.length > 0 ? '\n' : ''}`);
  } else if (o.format === 'csv') process.stdout.write(formatFleetCsv(runs));
  else if (o.format === 'jsonl') process.stdout.write(runs.map((r) => JSON.stringify(fleetJson(r)) + '\n').join(''));
  else {
    const all = runs.map((r) => fleetJson(r));
    process.stdout.write(JSON.stringify(slo === undefined ? all : { slo: sweepSloJson(slo, answers), runs: all }) + '\n');
  }
  // JSON Lines and CSV stay one record per fleet: the answer goes to stderr.
  if (o.format === 'jsonl' || o.format === 'csv') for (const l of lines) process.stderr.write(`kvpool: ${l}\n`);
  warn(groupWarnings(runs).map(({ message, configs }) => `${message} (fleet${configs.length > 1 ? 's' : ''} ${ranges(configs.map((i) => i + 1))})`));
  if (o.report !== undefined) {
    await writeFleetReport(o.report, runs, varied, slo, answers);
    process.stderr.write(`kvpool: report written to ${o.report}\n`);
  }
}
