// `kvpool fleet [trace]`: many engines behind a router on a step clock,
// printed as a table, JSON, JSON Lines or CSV. `--router` and `--engines`
// take lists: every combination runs (one after the other) and the table
// compares them.

import { Command, InvalidArgumentError, Option } from 'commander';
import cliProgress from 'cli-progress';
import { fleetSync } from '../fleet/fleet.js';
import { DEFAULT_STEP_MS, parseFleetOptions, type FleetOptions, type ParsedFleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { ROUTER_POLICIES, type RouterPolicy } from '../fleet/routers.js';
import { readTraceFile } from '../node/trace-file.js';
import { fleetOnThreadsOf } from '../node/fleet-threads.js';
import { fleetGlossaryHelp } from './fleet-glossary.js';
import { fleetJson, formatFleet, formatFleetComparison, formatFleetCsv } from './fleet-format.js';
import { addFleetZmqOptions, fleetPublishing, type FleetZmqFlags } from './fleet-publish.js';
import { FORMATS, count, type OutputFormat } from './format.js';
import { addReplayOptions, parseIntArg } from './options.js';
import { replayOptionsOf, traceSpec, warn, type ReplayFlags } from './replay-command.js';

/** The command's flags: replay's, the fleet's own options, and lists for the two it compares. */
export interface FleetFlags extends ReplayFlags, Pick<ParsedFleetOptions, 'stepMs' | 'arrival' | 'prefixWeight' | 'loadWeight' | 'affinityBlocks' | 'threads'> {
  engines: number[];
  router: RouterPolicy[];
}

export function positiveNumber(name: string) {
  return (v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a number > 0, got ${JSON.stringify(v)}`);
    return n;
  };
}

export function routers(v: string): RouterPolicy[] {
  return v.split(',').map((x) => {
    const r = x.trim();
    if (!(ROUTER_POLICIES as readonly string[]).includes(r)) throw new InvalidArgumentError(`--router must be among ${ROUTER_POLICIES.join(', ')}, got ${JSON.stringify(r)}`);
    return r as RouterPolicy;
  });
}

/** The fleet flags of `kvpool fleet` (the replay options apart). */
export function addFleetOptions(cmd: Command): Command {
  return cmd
    .option('--engines <list>', 'engines, each a pool of the replay options; a comma-separated list compares each', (v: string) => v.split(',').map((x) => parseIntArg('--engines', 1, x.trim())), [4])
    .addOption(new Option('--router <list>', `routing policy: ${ROUTER_POLICIES.join(', ')} (docs/fleet.md); a comma-separated list compares each`).argParser(routers).default(['round-robin'], 'round-robin'))
    .option('--step-ms <ms>', 'milliseconds of trace time per step (one decode iteration)', positiveNumber('--step-ms'), DEFAULT_STEP_MS)
    .addOption(new Option('--arrival <how>', 'timestamps: request r arrives at step floor(timestamp / step ms); instant: all at step 0').choices(['timestamps', 'instant']).default('timestamps'))
    .option('--prefix-weight <n>', 'prefix routers: weight of the matched share of the prompt (integer 0-1000)', (v: string) => parseIntArg('--prefix-weight', 0, v), 1)
    .option('--load-weight <n>', 'prefix routers: weight of the load share of the slots (integer 0-1000)', (v: string) => parseIntArg('--load-weight', 0, v), 1)
    .option('--threads <n>', 'run the engines on n worker threads (the router in the main thread; the same results)', (v: string) => parseIntArg('--threads', 0, v), 0)
    .option('--affinity-blocks <n>', 'session affinity: hash the key of this block, 1-based (33 skips the Mooncake trace\'s shared first 512 tokens at block size 16)', (v: string) => parseIntArg('--affinity-blocks', 1, v), 1);
}

/** The flags as `fleet()` options (the same names), one per combination of engines (slowest) and router. */
export function fleetOptionsOf(f: FleetFlags): FleetOptions[] {
  return f.engines.flatMap((engines) =>
    f.router.map((router) => ({
      ...replayOptionsOf(f),
      engines,
      router,
      stepMs: f.stepMs,
      arrival: f.arrival,
      prefixWeight: f.prefixWeight,
      loadWeight: f.loadWeight,
      affinityBlocks: f.affinityBlocks,
      ...(f.threads > 0 && { threads: f.threads }),
    })),
  );
}

function write(runs: readonly FleetRun[], format: OutputFormat, title: string): void {
  let text: string;
  if (format === 'json') text = JSON.stringify(runs.length === 1 ? fleetJson(runs[0]!) : runs.map(fleetJson)) + '\n';
  else if (format === 'jsonl') text = runs.map((r) => JSON.stringify(fleetJson(r)) + '\n').join('');
  else if (format === 'csv') text = formatFleetCsv(runs);
  else text = (runs.length === 1 ? formatFleet(runs[0]!, title) : formatFleetComparison(runs, title)) + '\n';
  process.stdout.write(text);
}

export function fleetCommand(): Command {
  const cmd = new Command('fleet')
    .description('replay a trace through many engines behind a router (round-robin, least-loaded, session affinity, approximate or precise prefix) and print hit rates, queueing and load balance')
    .argument('[trace]', 'a .jsonl or .jsonl.gz file, - for stdin, or a built-in trace name (mooncake-conversation); default: the built-in generated workload');
  addReplayOptions(cmd, false);
  addFleetOptions(cmd);
  cmd
    .addOption(new Option('--format <format>', 'output: a table for people, or json, jsonl or csv').choices(FORMATS).default('table'))
    .option('--json', 'the same as --format json', false)
    .option('--no-progress', 'no progress bar (there is one only when stderr is a terminal)');
  addFleetZmqOptions(cmd);
  cmd
    .addHelpText('after', fleetGlossaryHelp())
    .action(async (positional: string | undefined, o: FleetFlags & FleetZmqFlags & { format: OutputFormat; json: boolean; progress: boolean }) => {
      const spec = traceSpec(positional, o.trace);
      const all = fleetOptionsOf(o);
      if (o.zmq !== undefined && all.length > 1) throw new Error('--zmq publishes one fleet: give one --router and one --engines');
      const parsed = all.map((x) => parseFleetOptions(x)); // before reading a trace: bad options fail at once
      const requests = spec === undefined ? undefined : await readTraceFile(spec, parsed[0]!.replay.limit ?? Infinity);
      const bar = o.progress && process.stderr.isTTY
        ? new cliProgress.SingleBar({ format: 'fleet {run} [{bar}] {percentage}% | {value}/{total} requests routed | {duration}s', stream: process.stderr }, cliProgress.Presets.shades_classic)
        : null;
      const results: FleetRun[] = [];
      try {
        for (const [i, options] of all.entries()) {
          const label = { run: `${i + 1}/${all.length} ${options.router as string} x ${options.engines}` };
          let started = false;
          const onProgress = bar
            ? (done: number, total: number) => {
                if (!started) bar.start(total, 0, label);
                started = true;
                bar.update(done, label);
              }
            : undefined;
          const run = { ...options, ...(requests && { trace: requests }), ...(onProgress && { onProgress }) };
          results.push(
            o.zmq !== undefined ? await fleetPublishing(run, o, spec, options.engines!) : o.threads > 0 ? await fleetOnThreadsOf(run, parseFleetOptions(run), spec) : fleetSync(run, spec),
          );
        }
      } finally {
        bar?.stop();
      }
      const what = spec ?? `built-in workload (seed ${o.seed})`;
      const r0 = results[0]!;
      write(results, o.json ? 'json' : o.format, `kvpool fleet: ${what}, ${count(r0.requests, 'request')}` + (results.length === 1 ? `, ${r0.config.engines} engines, ${r0.config.router}` : `, ${results.length} fleets`));
      for (const r of results) warn(results.length === 1 ? r.warnings : r.warnings.map((w) => `${r.config.router} x ${r.config.engines}: ${w}`));
    });
  return cmd;
}
