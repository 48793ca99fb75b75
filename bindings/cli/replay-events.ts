// KV-cache events of `kvpool replay`: --events FILE and --zmq ENDPOINT
// (docs/events.md, from the replay command), for either engine: the flags,
// and a replay stepped while its batches are published, yielding after each
// step so that sends and replay requests are served.

import { InvalidArgumentError, Option, type Command } from 'commander';
import { kvEventsTopic } from '../events/vllm.js';
import { eventOutputs, type EventOutputs } from '../node/event-file.js';
import { ZmqEventPublisher } from '../node/zmq-publisher.js';
import { parseIntArg, seconds } from './options.js';

export interface EventFlags {
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

export function addEventOptions(cmd: Command): void {
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

export function wireOptions(o: EventFlags) {
  return { format: o.eventsFormat, blockHashes: o.eventHashes };
}

const sleep = (s: number) => new Promise<void>((resolve) => setTimeout(resolve, s * 1000));

/** A replay that publishes as it goes: one step at a time, then its result. */
export interface SteppedReplay<R> {
  step(): boolean;
  /** Requests done so far, of `total` (for the progress bar). */
  done(): number;
  readonly total: number;
  finish(): R;
  dispose(): void;
}

/**
 * Publishes a replay's events on ZeroMQ (one publisher per dp rank, and the
 * file of --events too), stepping `open(outputs)` one step at a time and
 * waiting for each step's batches to be sent before the next.
 */
export async function publishing<R>(o: EventFlags, dpSize: number, onProgress: ((done: number, total: number) => void) | undefined, open: (out: EventOutputs) => SteppedReplay<R>): Promise<R> {
  if (o.zmqTopic !== undefined && (o.zmqInstance !== undefined || o.zmqModel !== undefined)) {
    throw new InvalidArgumentError('--zmq-topic and --zmq-instance/--zmq-model both give the topic: use one');
  }
  if ((o.zmqInstance === undefined) !== (o.zmqModel === undefined)) throw new InvalidArgumentError('--zmq-instance and --zmq-model go together');
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
  let out: EventOutputs | null = null;
  try {
    for (const [r, p] of publishers.entries()) {
      process.stderr.write(`kvpool: rank ${r} publishes on ${p.endpoint}${p.topic ? ` topic ${p.topic}` : ''}${p.replayEndpoint ? `, replays on ${p.replayEndpoint}` : ''}\n`);
    }
    out = eventOutputs(o.events ?? null, publishers, wireOptions(o));
    if (o.zmqDelay > 0) await sleep(o.zmqDelay);
    const r = open(out);
    let result: R;
    try {
      const total = r.total;
      const every = Math.max(1, Math.floor(total / 200));
      let reported = -1;
      while (r.step()) {
        await Promise.all(publishers.map((p) => p.flushed()));
        const done = r.done();
        if (onProgress && done !== reported && done % every === 0 && done < total) {
          reported = done;
          onProgress(done, total);
        }
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
