// `kvpool sweep`: the replay over a grid of options, on every core, with a
// progress bar, a table/CSV/JSON of the results and an HTML or SVG report.

import { accessSync, constants, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { Command, Option } from 'commander';
import { sweep, SWEEP_GRID_KEYS, type SweepGrid } from '../node/sweep.js';
import { groupWarnings, writeReport } from '../node/report.js';
import type { ReplayOptions, ReplayRun } from '../replay/replay.js';
import { columnWidths, FORMATS, percent, ranges, type OutputFormat } from './format.js';
import { glossaryHelp } from './glossary.js';
import { addReplayOptions, parseIntArg } from './options.js';
import { addSweepFleetOptions, fleetSweepCommand, isFleetSweep, sweepFleetGlossaryHelp, type SweepFleetFlags } from './sweep-fleet.js';
import { sweepProgressBar } from './sweep-progress.js';
import { interruptible } from './interrupt.js';
import { traceSpec, warn, write, type ReplayFlags } from './replay-command.js';
import { aliased, refuseVllmSwitches } from './vllm-replay-command.js';

type GridFlags = { [K in keyof ReplayFlags]: K extends SweepGridKeyFlag ? Array<NonNullable<ReplayFlags[K]>> | undefined : ReplayFlags[K] };
type SweepGridKeyFlag = (typeof SWEEP_GRID_KEYS)[number];

/** Columns of the sweep table: the options that vary, then the figures that matter for sizing. */
export function formatSweepTable(runs: readonly ReplayRun[], varied: readonly SweepGridKeyFlag[]): string {
  const anyHost = runs.some((r) => r.mode === 'host-tier');
  const anyLoss = runs.some((r) => r.rejected + r.truncated > 0);
  const flag = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const head = [...varied.map(flag), 'hit rate', 'matched', 'evicted', ...(anyHost ? ['host hits', 'loaded'] : []), ...(anyLoss ? ['rejected', 'truncated'] : []), 'seconds'];
  const n = (x: number) => x.toLocaleString('en-US');
  const rows = runs.map((r) => [
    ...varied.map((k) => String(r.config[k])),
    percent(r.hitRate),
    n(r.matchedBlocks),
    n(r.evictedBlocks),
    ...(anyHost ? (r.mode === 'host-tier' ? [n(r.hostTier.hostHitBlocks), n(r.hostTier.blocksLoaded)] : ['-', '-']) : []),
    ...(anyLoss ? [n(r.rejected), n(r.truncated)] : []),
    r.seconds.toFixed(2),
  ]);
  const w = columnWidths(head, rows);
  const line = (cells: string[]) => cells.map((x, c) => x.padStart(w[c]!)).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

/** Refuses, before anything runs, a report that could not be written: a name not .html/.svg, a folder that is not there or not writable. */
function checkReportPath(file: string): void {
  if (!/\.(html?|svg)$/i.test(file)) throw new Error(`--report ${JSON.stringify(file)}: the file must end in .html or .svg`);
  const folder = dirname(resolve(file));
  let isFolder = false;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    throw new Error(`--report ${file}: the folder ${folder} does not exist`);
  }
  if (!isFolder) throw new Error(`--report ${file}: ${folder} is not a folder`);
  try {
    accessSync(folder, constants.W_OK);
  } catch {
    throw new Error(`--report ${file}: the folder ${folder} is not writable`);
  }
}

export function sweepCommand(): Command {
  const cmd = new Command('sweep')
    .description('replay every combination of the listed option values, in parallel on worker threads, and compare them (e.g. --num-blocks 4096,16384,65536 --eviction lru,lfu)')
    .argument('[trace]', 'a .jsonl or .jsonl.gz file, or a built-in trace name (mooncake-conversation), as --trace; default: the built-in generated workload');
  addReplayOptions(cmd, true);
  addSweepFleetOptions(cmd);
  cmd
    .option('--workers <n>', `worker threads (default: one per core, here ${availableParallelism()})`, (v: string) => parseIntArg('--workers', 1, v))
    .addOption(new Option('--format <format>', 'output on stdout: a table, or json (an array), jsonl or csv').choices(FORMATS).default('table'))
    .option('--report <file>', 'also write a self-contained report with charts: FILE.html (charts and table) or FILE.svg (the charts alone)')
    .option('--no-progress', 'no progress bar (there is one only when stderr is a terminal)')
    .addHelpText('after', glossaryHelp() + '\n' + sweepFleetGlossaryHelp())
    .action(async (positional: string | undefined, o: GridFlags & SweepFleetFlags & { format: OutputFormat; workers?: number; report?: string; progress: boolean }, command: Command) => {
      // The positional trace is --trace's twin, as in replay and fleet (both given: they must agree).
      const trace = traceSpec(positional, o.trace);
      if (trace !== undefined) o.trace = trace;
      if (o.report !== undefined) checkReportPath(o.report);
      // vLLM's names of two grid options (either engine; given with kvpool's name, the two must agree).
      const rec = o as unknown as Record<string, unknown>;
      if (o.maxNumSeqs !== undefined) rec['maxRunning'] = aliased(command, rec, 'maxRunning', 'maxNumSeqs');
      if (o.numGpuBlocksOverride !== undefined) rec['numBlocks'] = aliased(command, rec, 'numBlocks', 'numGpuBlocksOverride');
      // Every list flag becomes a grid entry (one value is a grid of one); the rest hold for every run.
      const grid: SweepGrid = {};
      for (const k of SWEEP_GRID_KEYS) if (o[k] !== undefined) (grid as Record<string, unknown>)[k] = o[k];
      // The KV cache in GiB replaces --num-blocks' default (typed, the two are refused together).
      if ((o.kvCacheGib !== undefined || o.gpuMemoryUtilization !== undefined) && command.getOptionValueSource('numBlocks') !== 'cli' && o.numGpuBlocksOverride === undefined) delete grid.numBlocks;
      const base: ReplayOptions = {
        requests: o.requests,
        publishAfterPrefill: o.publishAfterPrefill,
        ...(o.limit !== undefined && { limit: o.limit }),
        ...(o.compressRatios !== undefined && { compressRatios: o.compressRatios }),
      };
      if (isFleetSweep(o)) return fleetSweepCommand(o, grid, base, command);
      refuseVllmSwitches(command);
      const total = Object.values(grid).reduce((a, v) => a * (v as unknown[]).length, 1);
      const bar = sweepProgressBar(o.progress, total);
      let runs: ReplayRun[];
      try {
        runs = await interruptible(bar.stop, () =>
          sweep({
            ...base,
            ...(o.trace !== undefined && { trace: o.trace }),
            grid,
            ...(o.workers !== undefined && { workers: o.workers }),
            onProgress: bar.onProgress,
          }),
        );
      } finally {
        bar.stop();
      }
      const varied = SWEEP_GRID_KEYS.filter((k) => (grid[k]?.length ?? 0) > 1);
      if (o.format === 'table') {
        const what = o.trace ?? `built-in workload (${o.requests} requests)`;
        process.stdout.write(`kvpool sweep: ${what}, ${runs.length} configurations\n${formatSweepTable(runs, varied.length > 0 ? varied : ['numBlocks'])}\n`);
      } else write(runs, o.format, () => '');
      warn(groupWarnings(runs).map(({ message, configs }) => `${message} (configuration${configs.length > 1 ? 's' : ''} ${ranges(configs.map((i) => i + 1))})`));
      if (o.report !== undefined) {
        await writeReport(o.report, runs, varied);
        process.stderr.write(`kvpool: report written to ${o.report}\n`);
      }
    });
  return cmd;
}

