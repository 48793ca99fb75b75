// `kvpool fleet [trace]`: many engines behind a router on a step clock (or,
// with --timing, a millisecond clock), printed as a table, JSON, JSON Lines
// or CSV. `--router` and `--engines` take lists: every combination runs (one
// after the other) and the table compares them. With an SLO target the
// engine counts are searched instead, per router (fleet-slo.ts).

import { Command, InvalidArgumentError, Option } from 'commander';
import { fleetSync } from '../fleet/fleet.js';
import { checkFleetFits } from '../fleet/fleet-memory.js';
import { DEFAULT_STEP_MS, parseFleetOptions, type FleetOptions, type ParsedFleetOptions } from '../fleet/fleet-options.js';
import type { SloTargets } from '../fleet/slo-search.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { ROUTER_POLICIES, type RouterPolicy } from '../fleet/routers.js';
import { readTraceFile } from '../node/trace-file.js';
import { fleetOnThreadsOf } from '../node/fleet-threads.js';
import { fleetGlossaryHelp } from './fleet-glossary.js';
import { fleetJson, formatFleet, formatFleetComparison, formatFleetCsv } from './fleet-format.js';
import { addFleetZmqOptions, fleetPublishing, fleetToFiles, type FleetZmqFlags } from './fleet-publish.js';
import { FORMATS, count, type OutputFormat } from './format.js';
import { addReplayOptions, parseIntArg, positiveNumber } from './options.js';
import { replayOptionsOf, traceSpec, warn, type ReplayFlags } from './replay-command.js';
import { fleetSloSearch } from './fleet-slo.js';
import { didYouMean } from './did-you-mean.js';
import { progressBar } from './progress-bar.js';
import { sloAnswerLine, sloJson, type SloAnswer } from '../fleet/slo-answer.js';
import { addTimingOptions, checkSloTimed, sloOf, timedOptionsOf, type TimingFlags } from './timing-flags.js';
import { ENGINES, type Engine } from '../engines/replay.js';
import { addVllmNameOptions, ENGINE_FLAG_HELP, engineReplayOptions } from './vllm-replay-command.js';

/** The command's flags: replay's, the fleet's own options, the timed ones, and lists for the two it compares. */
export interface FleetFlags extends ReplayFlags, TimingFlags, Pick<ParsedFleetOptions, 'prefixWeight' | 'loadWeight' | 'affinityBlocks' | 'threads'> {
  engines: number[];
  router: RouterPolicy[];
  /** No default: a timed run refuses a step, a closed loop an arrival mode (the library's defaults are the same). */
  stepMs?: number;
  arrival?: ParsedFleetOptions['arrival'];
  /** Whether --num-blocks was typed (its default gives way to --kv-cache-gib and --gpu-memory-utilization). */
  numBlocksGiven?: boolean;
  engine: Engine;
  maxNumSeqs?: number;
  numGpuBlocksOverride?: number;
  longPrefillTokenThreshold?: number;
  schedulerReserveFullIsl: boolean;
}

export function routers(v: string): RouterPolicy[] {
  return v.split(',').map((x) => {
    const r = x.trim();
    if (!(ROUTER_POLICIES as readonly string[]).includes(r)) throw new InvalidArgumentError(`--router must be among ${ROUTER_POLICIES.join(', ')}, got ${JSON.stringify(r)}${didYouMean(r, ROUTER_POLICIES)}`);
    return r as RouterPolicy;
  });
}

/** The fleet flags of `kvpool fleet` (the replay options apart). */
export function addFleetOptions(cmd: Command): Command {
  cmd.addOption(new Option('--engine <engine>', `each engine's cache and scheduler: ${ENGINE_FLAG_HELP}`).choices(ENGINES).default('xllm'));
  addVllmNameOptions(cmd);
  cmd
    .option('--engines <list>', 'engines, each a pool of the replay options; a comma-separated list compares each (with an SLO target: the counts to try; one count N tries 1 to N)', (v: string) => v.split(',').map((x) => parseIntArg('--engines', 1, x.trim())), [4])
    .addOption(new Option('--router <list>', `routing policy: ${ROUTER_POLICIES.join(', ')} (docs/fleet.md); a comma-separated list compares each`).argParser(routers).default(['round-robin'], 'round-robin'))
    .option('--step-ms <ms>', `milliseconds of trace time per step (one decode iteration) (default: ${DEFAULT_STEP_MS})`, positiveNumber('--step-ms'))
    .addOption(new Option('--arrival <how>', 'timestamps: request r arrives at step floor(timestamp / step ms); instant: all at step 0 (default: timestamps)').choices(['timestamps', 'instant']))
    .option('--prefix-weight <n>', 'prefix routers: weight of the matched share of the prompt (integer 0-1000)', (v: string) => parseIntArg('--prefix-weight', 0, v), 1)
    .option('--load-weight <n>', 'prefix routers: weight of the load share of the slots (integer 0-1000)', (v: string) => parseIntArg('--load-weight', 0, v), 1)
    .option('--threads <n>', 'run the engines on n worker threads (the router in the main thread; the same results)', (v: string) => parseIntArg('--threads', 0, v), 0)
    .option('--affinity-blocks <n>', 'session affinity: hash the key of this block, 1-based (33 skips the Mooncake trace\'s shared first 512 tokens at block size 16)', (v: string) => parseIntArg('--affinity-blocks', 1, v), 1);
  return addTimingOptions(cmd);
}

/** The options every fleet of the command shares (all but engines and router); `cmd` tells the flags typed from defaults. */
function sharedOptionsOf(f: FleetFlags, cmd: Command): FleetOptions {
  const replay: FleetOptions = engineReplayOptions(cmd, f as unknown as Record<string, unknown>, replayOptionsOf(f), f.engine);
  if ((f.kvCacheGib !== undefined || f.gpuMemoryUtilization !== undefined) && f.numBlocksGiven !== true) delete replay.numBlocks;
  return {
    ...replay,
    ...(f.stepMs !== undefined && { stepMs: f.stepMs }),
    ...(f.arrival !== undefined && { arrival: f.arrival }),
    prefixWeight: f.prefixWeight,
    loadWeight: f.loadWeight,
    affinityBlocks: f.affinityBlocks,
    ...(f.threads > 0 && { threads: f.threads }),
    ...timedOptionsOf(f),
  };
}

/** The flags as `fleet()` options (the same names), one per combination of engines (slowest) and router; `shared` made once (it reads the timing file). */
export function fleetOptionsOf(f: FleetFlags, shared: FleetOptions): FleetOptions[] {
  return f.engines.flatMap((engines) => f.router.map((router) => ({ ...shared, engines, router })));
}

type Output = { format: OutputFormat; perRequest: boolean };

function write(runs: readonly FleetRun[], o: Output, title: string, slo?: { targets: SloTargets; answers: SloAnswer[] }): void {
  const json = (r: FleetRun) => fleetJson(r, o.perRequest);
  const answers = slo === undefined ? [] : slo.answers.map((a) => sloAnswerLine(a, slo.targets, slo.answers.length > 1));
  let text: string;
  if (o.format === 'json') {
    const value = runs.length === 1 ? json(runs[0]!) : runs.map(json);
    text = JSON.stringify(slo === undefined ? value : { slo: sloJson(slo.targets, slo.answers), runs: runs.map(json) }) + '\n';
  } else if (o.format === 'jsonl') text = runs.map((r) => JSON.stringify(json(r)) + '\n').join('');
  else if (o.format === 'csv') text = formatFleetCsv(runs);
  else text = (runs.length === 1 ? formatFleet(runs[0]!, title) : formatFleetComparison(runs, title)) + '\n' + answers.map((a) => `\n${a}`).join('') + (answers.length > 0 ? '\n' : '');
  process.stdout.write(text);
  // JSON carries the answer; JSON Lines and CSV stay one record per fleet, so it goes to stderr.
  if (o.format === 'jsonl' || o.format === 'csv') for (const a of answers) process.stderr.write(`kvpool: ${a}\n`);
}

/** A progress bar over the fleets run (none unless stderr is a terminal); `onProgress(label)` feeds it for one fleet. */
function fleetProgress(show: boolean) {
  const bar = show && process.stderr.isTTY
    ? progressBar('fleet {run} [{bar}] {percentage}% | {value}/{total} requests routed | {duration}s')
    : null;
  return {
    onProgress(run: string): FleetOptions['onProgress'] {
      if (bar === null) return undefined;
      let started = false;
      return (done: number, total: number) => {
        if (!started) bar.start(total, 0, { run });
        started = true;
        bar.update(done, { run });
      };
    },
    stop: () => bar?.stop(),
  };
}

/** Refusals the library cannot make (it refuses threads for a timed fleet itself): SLO targets untimed, a timed fleet publishing events. */
function checkTimedFlags(o: FleetFlags & FleetZmqFlags, timed: boolean, slo: SloTargets | undefined): void {
  checkSloTimed(slo, timed);
  if (timed && o.zmq !== undefined) throw new Error('--zmq publishes a fleet on the step clock; leave it out with --timing or --scheduler continuous');
}

export function fleetCommand(): Command {
  const cmd = new Command('fleet')
    .description('replay a trace through many engines behind a router (round-robin, least-loaded, session affinity, approximate or precise prefix) and print hit rates, queueing and load balance; with a timing model (--profile, --timing) also TTFT, TPOT, inter-token latency and throughput, and with --slo-ttft-ms / --slo-tpot-ms / --slo-itl-ms the fewest engines meeting them')
    .argument('[trace]', 'a .jsonl or .jsonl.gz file, - for stdin, or a built-in trace name (mooncake-conversation); default: the built-in generated workload');
  addReplayOptions(cmd, false);
  addFleetOptions(cmd);
  cmd
    .addOption(new Option('--format <format>', 'output: a table for people, or json, jsonl or csv').choices(FORMATS).default('table'))
    .option('--json', 'the same as --format json', false)
    .option('--per-request', 'timed, JSON: keep each request\'s times (latency.requests)', false)
    .option('--no-progress', 'no progress bar (there is one only when stderr is a terminal)');
  addFleetZmqOptions(cmd);
  cmd
    .addHelpText('after', fleetGlossaryHelp())
    .action(async (positional: string | undefined, o: FleetFlags & FleetZmqFlags & { format: OutputFormat; json: boolean; perRequest: boolean; progress: boolean }, command: Command) => {
      o.numBlocksGiven = command.getOptionValueSource('numBlocks') === 'cli';
      const spec = traceSpec(positional, o.trace);
      const shared = sharedOptionsOf(o, command); // once: it reads the timing file
      const all = fleetOptionsOf(o, shared);
      if (o.zmq !== undefined && all.length > 1) throw new Error('--zmq publishes one fleet: give one --router and one --engines');
      if (o.events !== undefined && all.length > 1) throw new Error('--events writes one fleet\'s streams: give one --router and one --engines');
      if (o.events !== undefined && o.zmq !== undefined) throw new Error('--events and --zmq: give one (--zmq publishes the streams --events would write)');
      if (o.events !== undefined && o.threads > 0) throw new Error('--events writes the streams of a fleet run in this thread; leave --threads out');
      const parsed = all.map((x) => parseFleetOptions(x)); // before reading a trace: bad options fail at once
      for (const p of parsed) checkFleetFits(p); // and so does a fleet too large for the core
      const slo = sloOf(o);
      checkTimedFlags(o, parsed[0]!.timed !== undefined, slo);
      if (o.events !== undefined && slo !== undefined) throw new Error('--events writes one fleet\'s streams; an SLO search runs many: leave one out');
      const requests = spec === undefined ? undefined : await readTraceFile(spec, parsed[0]!.replay.limit ?? Infinity);
      const trace = requests && { trace: requests };
      const bar = fleetProgress(o.progress);
      const results: FleetRun[] = [];
      let answers: SloAnswer[] | undefined;
      try {
        if (slo !== undefined) {
          const counts = o.engines.length === 1 ? o.engines[0]! : o.engines;
          // Where the trace and the model alone show no count can meet the targets, the answer says why.
          const found = fleetSloSearch({ ...shared, ...trace }, o.router, slo, counts, spec, bar.onProgress);
          results.push(...found.runs);
          answers = found.answers;
        } else {
          for (const [i, options] of all.entries()) {
            const onProgress = bar.onProgress(`${i + 1}/${all.length} ${options.router as string} x ${options.engines}`);
            const run = { ...options, ...trace, ...(onProgress && { onProgress }) };
            results.push(
              o.zmq !== undefined
                ? await fleetPublishing(run, o, spec, options.engines!)
                : o.events !== undefined
                  ? fleetToFiles(run, o, spec, options.engines!)
                  : o.threads > 0 ? await fleetOnThreadsOf(run, parseFleetOptions(run), spec) : fleetSync(run, spec),
            );
          }
        }
      } finally {
        bar.stop();
      }
      const what = spec ?? `built-in workload (seed ${o.seed})`;
      const r0 = results[0]!;
      const title = `kvpool fleet: ${what}, ${count(r0.requests, 'request')}` + (results.length === 1 ? `, ${r0.config.engines} engines, ${r0.config.router}` : `, ${results.length} fleets`);
      write(results, { format: o.json ? 'json' : o.format, perRequest: o.perRequest }, title, slo && answers && { targets: slo, answers });
      for (const r of results) warn(results.length === 1 ? r.warnings : r.warnings.map((w) => `${r.config.router} x ${r.config.engines}: ${w}`));
    });
  return cmd;
}
