// `kvpool replay [trace]`: one replay, printed as a table, JSON, JSON Lines or CSV.

import { Command, Option } from 'commander';
import cliProgress from 'cli-progress';
import { eventFileSink } from '../node/event-file.js';
import { readTraceFile } from '../node/trace-file.js';
import { parseReplayOptions, replaySync, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import { replayWithEvents } from '../replay/replay-events.js';
import { FORMATS, formatCsv, formatJsonLines, formatRun, type OutputFormat } from './format.js';
import { glossaryHelp } from './glossary.js';
import { addReplayOptions } from './options.js';

/** Commander's parsed flags (shared by replay and, as lists, by sweep). */
export interface ReplayFlags {
  trace?: string;
  blockSize: number;
  numBlocks: number;
  dpSize: number;
  maxRunning: number;
  seed: number;
  hostBlocks?: number;
  slidingWindow?: number;
  linearStateSlots?: number;
  eviction: ReplayOptions['eviction'];
  compressRatios?: number[];
  limit?: number;
  requests: number;
  publishAfterPrefill: boolean;
}

/** The flags as `replay()` options (the same names). */
export function replayOptionsOf(f: ReplayFlags): ReplayOptions {
  return {
    blockSize: f.blockSize,
    numBlocks: f.numBlocks,
    dpSize: f.dpSize,
    maxRunning: f.maxRunning,
    seed: f.seed,
    requests: f.requests,
    publishAfterPrefill: f.publishAfterPrefill,
    eviction: f.eviction,
    ...(f.limit !== undefined && { limit: f.limit }),
    ...(f.hostBlocks !== undefined && { hostBlocks: f.hostBlocks }),
    ...(f.slidingWindow !== undefined && { slidingWindow: f.slidingWindow }),
    ...(f.compressRatios !== undefined && { compressRatios: f.compressRatios }),
    ...(f.linearStateSlots !== undefined && { linearStateSlots: f.linearStateSlots }),
  };
}

/** The positional trace or --trace (not both). */
export function traceSpec(positional: string | undefined, flag: string | undefined): string | undefined {
  if (positional !== undefined && flag !== undefined && positional !== flag) {
    throw new Error(`two traces given: ${JSON.stringify(positional)} and --trace ${JSON.stringify(flag)}`);
  }
  return positional ?? flag;
}

/** Prints a result's warnings on stderr. */
export function warn(lines: readonly string[]): void {
  for (const w of lines) process.stderr.write(`kvpool: warning: ${w}\n`);
}

export function write(runs: readonly ReplayRun[], format: OutputFormat, title: (r: ReplayRun) => string): void {
  let text: string;
  if (format === 'json') text = runs.length === 1 ? JSON.stringify(runs[0]) + '\n' : JSON.stringify(runs) + '\n';
  else if (format === 'jsonl') text = formatJsonLines(runs);
  else if (format === 'csv') text = formatCsv(runs);
  else text = runs.map((r) => formatRun(r, title(r)) + '\n').join('\n');
  process.stdout.write(text);
}

export function replayCommand(): Command {
  const cmd = new Command('replay')
    .description('replay a Mooncake-style JSONL trace (or the built-in workload) through a BlockManagerPool and print what the cache did')
    .argument('[trace]', 'a .jsonl or .jsonl.gz file, - for stdin, or a built-in trace name (mooncake-conversation); default: the built-in generated workload of multi-turn chats');
  addReplayOptions(cmd, false);
  cmd
    .addOption(new Option('--format <format>', 'output: a table for people, or json, jsonl (one object per line) or csv').choices(FORMATS).default('table'))
    .option('--json', 'the same as --format json', false)
    .option('--events <file>', 'write the KV-cache events as vLLM KVEventBatch msgpack, one batch per step (plain mode only)')
    .option('--no-progress', 'no progress bar (there is one only when stderr is a terminal)')
    .addHelpText('after', glossaryHelp())
    .action(async (positional: string | undefined, o: ReplayFlags & { format: OutputFormat; json: boolean; events?: string; progress: boolean }) => {
      const spec = traceSpec(positional, o.trace);
      const options = replayOptionsOf(o);
      const parsed = parseReplayOptions(options); // before reading a trace: bad options fail at once
      const requests = spec === undefined ? undefined : await readTraceFile(spec, parsed.limit ?? Infinity);
      const format: OutputFormat = o.json ? 'json' : o.format;
      const bar =
        o.progress && process.stderr.isTTY
          ? new cliProgress.SingleBar(
              { format: 'replay [{bar}] {percentage}% | {value}/{total} requests | {duration}s', stream: process.stderr },
              cliProgress.Presets.shades_classic,
            )
          : null;
      let started = false;
      const onProgress = bar
        ? (done: number, total: number) => {
            if (!started) {
              bar.start(total, 0);
              started = true;
            }
            bar.update(done);
          }
        : undefined;
      const run = { ...options, ...(requests && { trace: requests }), ...(onProgress && { onProgress }) };
      let result: ReplayRun;
      const sink = o.events ? eventFileSink(o.events) : null;
      try {
        result = sink ? replayWithEvents(run, sink.write, spec) : replaySync(run, parsed, spec);
      } finally {
        sink?.close();
        bar?.stop();
      }
      write([result], format, (r) => `kvpool replay: ${spec ?? `built-in workload (${o.requests} requests, seed ${o.seed})`}, ${r.requests.toLocaleString('en-US')} requests, ${r.mode}`);
      warn(result.warnings);
    });
  return cmd;
}
