// `kvpool replay [trace]`: one replay, printed as a table, JSON, JSON Lines or CSV.

import { Command, Option } from 'commander';
import { progressBar } from './progress-bar.js';
import { readTraceFile } from '../node/trace-file.js';
import { parseReplayOptions, replaySync, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import { EventReplay, replayWithEventHook } from '../replay/replay-events.js';
import { addEventOptions, publishing, wireOptions, type EventFlags } from './replay-events.js';
import { eventOutputs } from '../node/event-file.js';
import { FORMATS, count, formatCsv, formatJsonLines, formatRun, type OutputFormat } from './format.js';
import { glossaryHelp } from './glossary.js';
import { addReplayOptions, parseIntArg, seconds } from './options.js';
import { addEngineOptions, engineHelp, runVllmCommand, writeVllm, xllmEngineFlags, type EngineFlags } from './vllm-replay-command.js';

/** Commander's parsed flags (shared by replay and, as lists, by sweep). */
export interface ReplayFlags {
  trace?: string;
  blockSize: number;
  numBlocks: number;
  dpSize: number;
  maxRunning: number;
  seed: number;
  hostBlocks?: number;
  storeBlocks?: number;
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
    ...(f.storeBlocks !== undefined && { storeBlocks: f.storeBlocks }),
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
    .description('replay a Mooncake-style JSONL trace (or the built-in workload) on an engine (--engine xllm: a BlockManagerPool under the replay kernel, the default; vllm: vLLM v1\'s scheduler and block pool) and print what the cache did')
    .argument('[trace]', 'a .jsonl or .jsonl.gz file, - for stdin, or a built-in trace name (mooncake-conversation); default: the built-in generated workload of multi-turn chats');
  addReplayOptions(cmd, false);
  cmd
    .addOption(new Option('--format <format>', 'output: a table for people, or json, jsonl (one object per line) or csv').choices(FORMATS).default('table'))
    .option('--json', 'the same as --format json', false)
    .option('--no-progress', 'no progress bar (there is one only when stderr is a terminal)');
  addEventOptions(cmd);
  addEngineOptions(cmd);
  cmd
    .addHelpText('after', glossaryHelp() + '\n' + engineHelp())
    .action(async (positional: string | undefined, o: ReplayFlags & EventFlags & EngineFlags & { format: OutputFormat; json: boolean; progress: boolean }) => {
      const spec = traceSpec(positional, o.trace);
      const format: OutputFormat = o.json ? 'json' : o.format;
      const bar =
        o.progress && process.stderr.isTTY
          ? progressBar('replay [{bar}] {percentage}% | {value}/{total} requests | {duration}s')
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
      if (o.engine === 'vllm') {
        let run;
        try {
          run = await runVllmCommand(cmd, spec, o as unknown as Record<string, unknown> & EventFlags, onProgress);
        } finally {
          bar?.stop();
        }
        writeVllm(run, format, spec, o.seed);
        warn(run.warnings);
        return;
      }
      const options = replayOptionsOf({ ...o, ...xllmEngineFlags(cmd, o) });
      const parsed = parseReplayOptions(options); // before reading a trace: bad options fail at once
      const requests = spec === undefined ? undefined : await readTraceFile(spec, parsed.limit ?? Infinity);
      const run = { ...options, ...(requests && { trace: requests }), ...(onProgress && { onProgress }) };
      let result: ReplayRun;
      try {
        result = o.zmq !== undefined ? await replayPublishing(run, o, spec, onProgress) : o.events !== undefined ? replayToFile(run, o, spec) : replaySync(run, parsed, spec);
      } finally {
        bar?.stop();
      }
      write([result], format, (r) => `kvpool replay: ${spec ?? `built-in workload (seed ${o.seed})`}, ${count(r.requests, 'request')}, ${r.mode}`);
      warn(result.warnings);
    });
  return cmd;
}

function replayToFile(run: ReplayOptions, o: EventFlags, spec: string | undefined): ReplayRun {
  const out = eventOutputs(o.events!, null, wireOptions(o));
  try {
    return replayWithEventHook(run, out.hook, spec);
  } finally {
    out.close();
  }
}

/** The replay stepped one request at a time, yielding so that sends and replay requests are served. */
function replayPublishing(run: ReplayOptions, o: EventFlags, spec: string | undefined, onProgress: ReplayOptions['onProgress']): Promise<ReplayRun> {
  return publishing(o, run.dpSize ?? 1, onProgress, (out) => {
    const r = new EventReplay({ ...run, onProgress: undefined }, out.hook, spec);
    return { step: () => r.step(), done: () => r.done, total: r.total, finish: () => r.finish(), dispose: () => r.dispose() };
  });
}
