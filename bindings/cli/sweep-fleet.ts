// `kvpool sweep --router ... --engines ...`: every grid point a fleet of
// engines behind a router (docs/sweep.md, fleets). Its own table (the
// fleet's figures), the fleet's CSV/JSON, and the fleet report.

import { Option, type Command } from 'commander';
import type { FleetArrival } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { ROUTER_POLICIES, type RouterPolicy } from '../fleet/routers.js';
import { writeFleetReport, type FleetVaried } from '../node/fleet-report.js';
import { groupWarnings } from '../node/report.js';
import { fleetSweep } from '../node/fleet-sweep.js';
import type { ReplayOptions } from '../replay/replay.js';
import { SWEEP_GRID_KEYS, type SweepGrid } from '../node/sweep.js';
import { routers } from './fleet-command.js';
import { fleetJson, formatFleetCsv } from './fleet-format.js';
import { fleetFieldLines } from './fleet-glossary.js';
import { percent, ranges, type OutputFormat } from './format.js';
import { parseIntArg, positiveNumber } from './options.js';
import { warn } from './replay-command.js';
import { sweepProgressBar } from './sweep-progress.js';

export interface SweepFleetFlags {
  router?: RouterPolicy[];
  engines?: number[];
  stepMs?: number;
  arrival?: FleetArrival;
  prefixWeight?: number;
  loadWeight?: number;
  affinityBlocks?: number;
}

const FLEET_ONLY = ['stepMs', 'arrival', 'prefixWeight', 'loadWeight', 'affinityBlocks'] as const;

/** The fleet axes and the fleet's fixed options; none has a default, so a plain sweep is told apart by their absence. */
export function addSweepFleetOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--router <list>', `fleets: routing policies to compare (${ROUTER_POLICIES.join(', ')}); every grid point becomes a fleet (default router round-robin)`).argParser(routers))
    .option('--engines <list>', 'fleets: fleet sizes to compare (default 4)', (v: string) => v.split(',').map((x) => parseIntArg('--engines', 1, x.trim())))
    .option('--step-ms <ms>', 'fleets: milliseconds of trace time per step (default 20)', positiveNumber('--step-ms'))
    .addOption(new Option('--arrival <how>', 'fleets: timestamps or instant (default timestamps)').choices(['timestamps', 'instant']))
    .option('--prefix-weight <n>', 'fleets, prefix routers: weight of the matched share (default 1)', (v: string) => parseIntArg('--prefix-weight', 0, v))
    .option('--load-weight <n>', 'fleets, prefix routers: weight of the load share (default 1)', (v: string) => parseIntArg('--load-weight', 0, v))
    .option('--affinity-blocks <n>', 'fleets, session affinity: hash the key of this block (default 1)', (v: string) => parseIntArg('--affinity-blocks', 1, v));
}

/** `--help` text of `kvpool sweep` for fleet sweeps: each row is a fleet, with the fleet's fields (those of `kvpool fleet --help`). */
export function sweepFleetGlossaryHelp(): string {
  return ['', 'With --router or --engines every grid point is a fleet, and the result fields are the fleet\'s:', ...fleetFieldLines(),
    'The configuration (`config`) then has the fleet\'s options too. Details: docs/fleet.md, docs/sweep.md.'].join('\n');
}

/** Whether the flags ask for fleets; the fleet-only flags alone are a mistake, not a plain sweep. */
export function isFleetSweep(o: SweepFleetFlags): boolean {
  if (o.router !== undefined || o.engines !== undefined) return true;
  const stray = FLEET_ONLY.filter((k) => o[k] !== undefined);
  if (stray.length > 0) throw new Error(`--${stray[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies to fleets: give --router or --engines too`);
  return false;
}

/** Columns: the varied replay options, router, engines, then the fleet figures. */
export function formatFleetSweepTable(runs: readonly FleetRun[], varied: FleetVaried): string {
  const flag = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const head = [...varied.map(flag), 'hit rate', 'queue mean', 'queue p99', 'imbalance', 'rejected'];
  const rows = runs.map((r) => [
    ...varied.map((k) => String(r.config[k])),
    percent(r.hitRate),
    r.queueing.meanSteps.toFixed(2),
    r.queueing.p99Steps.toLocaleString('en-US'),
    r.loadImbalance.toFixed(3),
    r.rejected.toLocaleString('en-US'),
  ]);
  const w = head.map((h, c) => Math.max(h.length, ...rows.map((row) => row[c]!.length)));
  const line = (cells: string[]) => cells.map((x, c) => (varied[c] === 'router' ? x.padEnd(w[c]!) : x.padStart(w[c]!))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

type Flags = SweepFleetFlags & { trace?: string; requests: number; format: OutputFormat; workers?: number; report?: string; progress: boolean };

/** The fleet sweep: runs it, prints it, writes the report. */
export async function fleetSweepCommand(o: Flags, grid: SweepGrid, base: Omit<ReplayOptions, 'onProgress' | 'trace'>): Promise<void> {
  const fleetGrid = { ...grid, engines: o.engines ?? [4], router: o.router ?? ['round-robin'] };
  const total = Object.values(fleetGrid).reduce((a, v) => a * (v as unknown[]).length, 1);
  const bar = sweepProgressBar(o.progress, total, 'fleets');
  let runs: FleetRun[];
  try {
    runs = await fleetSweep({
      ...base,
      ...(o.stepMs !== undefined && { stepMs: o.stepMs }),
      ...(o.arrival !== undefined && { arrival: o.arrival }),
      ...(o.prefixWeight !== undefined && { prefixWeight: o.prefixWeight }),
      ...(o.loadWeight !== undefined && { loadWeight: o.loadWeight }),
      ...(o.affinityBlocks !== undefined && { affinityBlocks: o.affinityBlocks }),
      ...(o.trace !== undefined && { trace: o.trace }),
      grid: fleetGrid,
      ...(o.workers !== undefined && { workers: o.workers }),
      onProgress: bar.onProgress,
    });
  } finally {
    bar.stop();
  }
  // Router and engines are always columns: they name the fleet.
  const varied: FleetVaried = [...SWEEP_GRID_KEYS.filter((k) => (grid[k]?.length ?? 0) > 1), 'router', 'engines'];
  if (o.format === 'table') {
    const what = o.trace ?? `built-in workload (${o.requests} requests)`;
    process.stdout.write(`kvpool sweep: ${what}, ${runs.length} fleets\n${formatFleetSweepTable(runs, varied)}\n`);
  } else if (o.format === 'csv') process.stdout.write(formatFleetCsv(runs));
  else if (o.format === 'jsonl') process.stdout.write(runs.map((r) => JSON.stringify(fleetJson(r)) + '\n').join(''));
  else process.stdout.write(JSON.stringify(runs.map((r) => fleetJson(r))) + '\n');
  warn(groupWarnings(runs).map(({ message, configs }) => `${message} (fleet${configs.length > 1 ? 's' : ''} ${ranges(configs.map((i) => i + 1))})`));
  if (o.report !== undefined) {
    await writeFleetReport(o.report, runs, varied);
    process.stderr.write(`kvpool: report written to ${o.report}\n`);
  }
}
