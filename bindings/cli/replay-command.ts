// `kvpool replay [trace]`: one replay, printed as a table, JSON, JSON Lines or CSV.

import { Command, InvalidArgumentError, Option } from 'commander';
import { progressBar } from './progress-bar.js';
import { eventOutputs } from '../node/event-file.js';
import { readTraceFile } from '../node/trace-file.js';
import { ZmqEventPublisher } from '../node/zmq-publisher.js';
import { parseReplayOptions, replaySync, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import { EventReplay, replayWithEventHook, type ReplayStepHook } from '../replay/replay-events.js';
import { FORMATS, count, formatCsv, formatJsonLines, formatRun, type OutputFormat } from './format.js';
import { glossaryHelp } from './glossary.js';
import { addReplayOptions, parseIntArg, seconds } from './options.js';
import { kvEventsTopic } from '../events/vllm.js';
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
          run = await runVllmCommand(cmd, spec, o as unknown as Record<string, unknown>, onProgress);
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

// ---- KV-cache events: --events FILE and --zmq ENDPOINT ----

interface EventFlags {
  events?: string;
  eventsFormat: 'map' | 'positional';
  eventHashes: 'uint64' | 'bytes';
  zmq?: string;
  zmqReplay?: string;
  zmqTopic?: string;
  zmqInstance?: string;
  zmqModel?: string;
  zmqRanks: 'port' | 'topic';
  zmqReplayFrames: 'topic' | 'seq';
  zmqBuffer: number;
  zmqDelay: number;
  zmqHold: number;
}

function addEventOptions(cmd: Command): void {
  cmd
    .option('--events <file>', 'write the KV-cache events to a file: vLLM KVEventBatch msgpack messages, one per dp rank per step (docs/events.md)')
    .addOption(new Option('--events-format <form>', 'event form for --events and --zmq: map (vLLM 0.26 on) or positional (earlier vLLM)').choices(['map', 'positional']).default('map'))
    .addOption(new Option('--event-hashes <form>', 'block hashes as uint64 (vLLM\'s integer form; Dynamo reads only this) or bytes (16)').choices(['uint64', 'bytes']).default('uint64'))
    .option('--zmq <endpoint>', 'publish each step\'s batches on ZeroMQ while replaying, as vLLM does (e.g. tcp://*:5557; rank r on port + r)')
    .option('--zmq-replay <endpoint>', 'with --zmq: serve replays of recent batches on this ROUTER endpoint (rank r on port + r)')
    .option('--zmq-topic <topic>', 'with --zmq: the topic of every message (default "")')
    .option('--zmq-instance <name>', 'with --zmq and --zmq-model: topic kv@<name>@<model> (llm-d reads the instance as the pod)')
    .option('--zmq-model <name>', 'with --zmq-instance: the model part of the topic')
    .addOption(new Option('--zmq-ranks <how>', 'port: rank r on the endpoint\'s port + r (vLLM); topic: all ranks connect to one endpoint, rank r on topic kv@<instance>-dp<r>@<model>').choices(['port', 'topic']).default('port'))
    .addOption(new Option('--zmq-replay-frames <form>', 'replay replies as [topic, seq, payload] (vLLM 0.26 on) or [seq, payload] (earlier vLLM, Dynamo)').choices(['topic', 'seq']).default('topic'))
    .option('--zmq-buffer <n>', 'with --zmq-replay: batches kept for replays per rank', (v: string) => parseIntArg('--zmq-buffer', 1, v), 10000)
    .option('--zmq-delay <seconds>', 'with --zmq: wait this long before the first request (subscribers connecting)', seconds('--zmq-delay'), 0)
    .option('--zmq-hold <seconds>', 'with --zmq: keep publishing sockets open this long after the replay (replays still served)', seconds('--zmq-hold'), 0);
}

function wireOptions(o: EventFlags) {
  return { format: o.eventsFormat, blockHashes: o.eventHashes };
}

function replayToFile(run: ReplayOptions, o: EventFlags, spec: string | undefined): ReplayRun {
  const out = eventOutputs(o.events!, null, wireOptions(o));
  try {
    return replayWithEventHook(run, out.hook, spec);
  } finally {
    out.close();
  }
}

const sleep = (s: number) => new Promise<void>((resolve) => setTimeout(resolve, s * 1000));

/** The replay stepped one request at a time, yielding so that sends and replay requests are served. */
async function replayPublishing(run: ReplayOptions, o: EventFlags, spec: string | undefined, onProgress: ReplayOptions['onProgress']): Promise<ReplayRun> {
  if (o.zmqTopic !== undefined && (o.zmqInstance !== undefined || o.zmqModel !== undefined)) {
    throw new InvalidArgumentError('--zmq-topic and --zmq-instance/--zmq-model both give the topic: use one');
  }
  if ((o.zmqInstance === undefined) !== (o.zmqModel === undefined)) throw new InvalidArgumentError('--zmq-instance and --zmq-model go together');
  const dpSize = run.dpSize ?? 1;
  const byTopic = o.zmqRanks === 'topic';
  if (byTopic && o.zmqInstance === undefined) throw new InvalidArgumentError('--zmq-ranks topic needs --zmq-instance and --zmq-model');
  const publishers = await ZmqEventPublisher.forRanks(dpSize, {
    endpoint: o.zmq!,
    ranks: o.zmqRanks,
    ...(byTopic ? { instance: o.zmqInstance!, model: o.zmqModel! } : { topic: o.zmqTopic ?? (o.zmqInstance !== undefined ? kvEventsTopic(o.zmqInstance, o.zmqModel!) : '') }),
    ...(o.zmqReplay !== undefined && { replayEndpoint: o.zmqReplay }),
    bufferSteps: o.zmqBuffer,
    replayFrames: o.zmqReplayFrames,
  });
  let out: ReturnType<typeof eventOutputs> | null = null;
  try {
    for (const [r, p] of publishers.entries()) {
      process.stderr.write(`kvpool: rank ${r} publishes on ${p.endpoint}${p.topic ? ` topic ${p.topic}` : ''}${p.replayEndpoint ? `, replays on ${p.replayEndpoint}` : ''}\n`);
    }
    out = eventOutputs(o.events ?? null, publishers, wireOptions(o));
    const hook: ReplayStepHook = out.hook;
    if (o.zmqDelay > 0) await sleep(o.zmqDelay);
    const r = new EventReplay({ ...run, onProgress: undefined }, hook, spec);
    let result: ReplayRun;
    try {
      const total = r.total;
      const every = Math.max(1, Math.floor(total / 200));
      while (r.step()) {
        await Promise.all(publishers.map((p) => p.flushed()));
        if (onProgress && r.done % every === 0 && r.done < total) onProgress(r.done, total);
      }
      result = r.finish();
      onProgress?.(total, total);
    } finally {
      r.dispose();
    }
    await Promise.all(publishers.map((p) => p.flushed()));
    if (o.zmqHold > 0) {
      process.stderr.write(`kvpool: replay done; the publishers stay open ${o.zmqHold} s\n`);
      await sleep(o.zmqHold);
    }
    return result;
  } finally {
    out?.close();
    for (const p of publishers) p.close();
  }
}
