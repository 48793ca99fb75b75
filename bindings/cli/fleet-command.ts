// `kvpool fleet [trace]`: many engines behind a router on a step clock,
// printed as a table, JSON, JSON Lines or CSV.

import { Command, InvalidArgumentError, Option } from 'commander';
import cliProgress from 'cli-progress';
import { fleetSync } from '../fleet/fleet.js';
import { DEFAULT_STEP_MS, parseFleetOptions, type FleetArrival, type FleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { ROUTER_POLICIES, type RouterPolicy } from '../fleet/routers.js';
import { readTraceFile } from '../node/trace-file.js';
import { fleetGlossaryHelp } from './fleet-glossary.js';
import { fleetJson, formatFleet, formatFleetCsv } from './fleet-format.js';
import { addFleetZmqOptions, fleetPublishing, type FleetZmqFlags } from './fleet-publish.js';
import { FORMATS, type OutputFormat } from './format.js';
import { addReplayOptions, parseIntArg } from './options.js';
import { replayOptionsOf, traceSpec, warn, type ReplayFlags } from './replay-command.js';

export interface FleetFlags extends ReplayFlags {
  engines: number;
  router: RouterPolicy;
  stepMs: number;
  arrival: FleetArrival;
  prefixWeight: number;
  loadWeight: number;
  affinityBlocks: number;
}

function positiveNumber(name: string) {
  return (v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a number > 0, got ${JSON.stringify(v)}`);
    return n;
  };
}

/** The fleet flags of `kvpool fleet` (the replay options apart). */
export function addFleetOptions(cmd: Command): Command {
  return cmd
    .option('--engines <n>', 'engines, each a pool of the replay options', (v: string) => parseIntArg('--engines', 1, v), 4)
    .addOption(new Option('--router <policy>', 'routing policy (docs/fleet.md)').choices(ROUTER_POLICIES).default('round-robin'))
    .option('--step-ms <ms>', 'milliseconds of trace time per step (one decode iteration)', positiveNumber('--step-ms'), DEFAULT_STEP_MS)
    .addOption(new Option('--arrival <how>', 'timestamps: request r arrives at step floor(timestamp / step ms); instant: all at step 0').choices(['timestamps', 'instant']).default('timestamps'))
    .option('--prefix-weight <n>', 'prefix routers: weight of the matched share of the prompt (integer 0-1000)', (v: string) => parseIntArg('--prefix-weight', 0, v), 1)
    .option('--load-weight <n>', 'prefix routers: weight of the load share of the slots (integer 0-1000)', (v: string) => parseIntArg('--load-weight', 0, v), 1)
    .option('--affinity-blocks <n>', 'session affinity: hash the key of this block, 1-based (33 skips the Mooncake trace\'s shared first 512 tokens at block size 16)', (v: string) => parseIntArg('--affinity-blocks', 1, v), 1);
}

/** The flags as `fleet()` options (the same names). */
export function fleetOptionsOf(f: FleetFlags): FleetOptions {
  return {
    ...replayOptionsOf(f),
    engines: f.engines,
    router: f.router,
    stepMs: f.stepMs,
    arrival: f.arrival,
    prefixWeight: f.prefixWeight,
    loadWeight: f.loadWeight,
    affinityBlocks: f.affinityBlocks,
  };
}

function write(r: FleetRun, format: OutputFormat, title: string): void {
  if (format === 'json' || format === 'jsonl') process.stdout.write(JSON.stringify(fleetJson(r)) + '\n');
  else if (format === 'csv') process.stdout.write(formatFleetCsv([r]));
  else process.stdout.write(formatFleet(r, title) + '\n');
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
      const options = fleetOptionsOf(o);
      const parsed = parseFleetOptions(options); // before reading a trace: bad options fail at once
      const requests = spec === undefined ? undefined : await readTraceFile(spec, parsed.replay.limit ?? Infinity);
      const bar = o.progress && process.stderr.isTTY
        ? new cliProgress.SingleBar({ format: 'fleet [{bar}] {percentage}% | {value}/{total} requests routed | {duration}s', stream: process.stderr }, cliProgress.Presets.shades_classic)
        : null;
      let started = false;
      const onProgress = bar
        ? (done: number, total: number) => {
            if (!started) bar.start(total, 0);
            started = true;
            bar.update(done);
          }
        : undefined;
      let result: FleetRun;
      try {
        const run = { ...options, ...(requests && { trace: requests }), ...(onProgress && { onProgress }) };
        result = o.zmq !== undefined ? await fleetPublishing(run, o, spec, o.engines) : fleetSync(run, spec);
      } finally {
        bar?.stop();
      }
      const what = spec ?? `built-in workload (${o.requests} requests, seed ${o.seed})`;
      write(result, o.json ? 'json' : o.format, `kvpool fleet: ${what}, ${result.requests.toLocaleString('en-US')} requests, ${o.engines} engines, ${result.config.router}`);
      warn(result.warnings);
    });
  return cmd;
}
