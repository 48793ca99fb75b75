// `kvpool fleet --zmq`: every engine publishes its KV events as a vLLM
// engine does, on its own endpoint (the given port + engine index, or with
// --zmq-ranks topic all on one endpoint they connect to) with the topic
// kv@engine-<e>@<model>, so llm-d sees each engine as a pod and Dynamo as a
// worker. The fleet is stepped one step at a time, yielding while the step's
// batches are sent (and replay requests served); with --threads the engines
// run on worker threads and the batches come back to this thread to be sent.

import { closeSync, openSync, writeSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { kvEventsTopic, type BlockHashFormat, type VllmEventFormat } from '../events/vllm.js';
import { Fleet, type FleetEventSink } from '../fleet/fleet.js';
import { parseFleetOptions, type FleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { engineInstance } from '../fleet/precise-prefix.js';
import { fleetOnThreadsOf } from '../node/fleet-threads.js';
import { rankEndpoint, ZmqEventPublisher } from '../node/zmq-publisher.js';
import { parseIntArg, seconds } from './options.js';

export interface FleetZmqFlags {
  /** Write each engine's event batches to a file of its own (FILE with .engine-<e> before its extension). */
  events?: string;
  zmq?: string;
  zmqReplay?: string;
  zmqModel: string;
  zmqRanks: 'port' | 'topic';
  eventsFormat: VllmEventFormat;
  eventHashes: BlockHashFormat;
  zmqBuffer: number;
  zmqDelay: number;
  zmqHold: number;
}

export function addFleetZmqOptions(cmd: Command): Command {
  return cmd
    .option('--events <file>', 'write each engine\'s KV events to a file of its own, vLLM KVEventBatch msgpack messages: events.msgpack gives events.engine-0.msgpack, events.engine-1.msgpack, ... (ts: the step\'s trace time in seconds)')
    .option('--zmq <endpoint>', 'publish each engine\'s KV events on ZeroMQ as vLLM does: engine e on the endpoint\'s port + e, topic kv@engine-<e>@<model>')
    .addOption(new Option('--zmq-ranks <how>', 'with --zmq: port (engine e on port + e, as vLLM\'s ranks) or topic (every engine connects to the one endpoint, a router\'s bound socket; the topics tell them apart)').choices(['port', 'topic']).default('port'))
    .addOption(new Option('--events-format <form>', 'with --events and --zmq: event form, map (vLLM 0.26 on) or positional (earlier vLLM)').choices(['map', 'positional']).default('map'))
    .addOption(new Option('--event-hashes <form>', 'with --events and --zmq: block hashes as uint64 (vLLM\'s integer form; Dynamo reads only this) or bytes (16)').choices(['uint64', 'bytes']).default('uint64'))
    .option('--zmq-replay <endpoint>', 'with --zmq: serve replays of recent batches (engine e on port + e)')
    .option('--zmq-model <name>', 'with --zmq: the model part of the topics', 'kvpool')
    .option('--zmq-buffer <n>', 'with --zmq-replay: batches kept for replays per engine', (v: string) => parseIntArg('--zmq-buffer', 1, v), 10000)
    .option('--zmq-delay <seconds>', 'with --zmq: wait this long before the first step (subscribers connecting)', seconds('--zmq-delay'), 0)
    .option('--zmq-hold <seconds>', 'with --zmq: keep the sockets open this long after the run (replays still served)', seconds('--zmq-hold'), 0);
}

/** Engine e's file of `--events FILE`: FILE with `.engine-<e>` before its extension (or at its end). */
export function engineEventFile(file: string, e: number): string {
  const m = /^(.*?)(\.[^./\\]*)?$/.exec(file)!;
  return `${m[1]}.engine-${e}${m[2] ?? ''}`;
}

/**
 * Runs the fleet writing each engine's event batches to its own file (see
 * `engineEventFile`), on either clock: the streams each engine would
 * publish, written in large chunks.
 */
export function fleetToFiles(options: FleetOptions, o: FleetZmqFlags, spec: string | undefined, engines: number): FleetRun {
  const p = parseFleetOptions(options); // before any file: bad options fail at once
  const files: number[] = [];
  const pending: Uint8Array[][] = [];
  const sizes: number[] = [];
  const flush = (e: number) => {
    const fd = files[e]!;
    for (const b of pending[e]!) for (let off = 0; off < b.length; ) off += writeSync(fd, b, off, b.length - off);
    pending[e] = [];
    sizes[e] = 0;
  };
  try {
    for (let e = 0; e < engines; e++) {
      const file = engineEventFile(o.events!, e);
      try {
        files.push(openSync(file, 'w'));
      } catch (err) {
        throw new Error(`--events: cannot write ${JSON.stringify(file)}: ${(err as Error).message}`);
      }
      pending.push([]);
      sizes.push(0);
    }
    const sink: FleetEventSink = (e, batches) => {
      for (const b of batches) {
        pending[e]!.push(b);
        sizes[e]! += b.length;
      }
      if (sizes[e]! >= 4 << 20) flush(e);
    };
    const fleet = new Fleet(options, spec, sink, p, { format: o.eventsFormat, blockHashes: o.eventHashes });
    try {
      const run = fleet.run();
      for (let e = 0; e < engines; e++) flush(e);
      return run;
    } finally {
      fleet.dispose();
    }
  } finally {
    for (const fd of files) closeSync(fd);
  }
}

const sleep = (s: number) => new Promise<void>((resolve) => setTimeout(resolve, s * 1000));

/** Runs the fleet with every engine publishing (see the file's header). */
export async function fleetPublishing(options: FleetOptions, o: FleetZmqFlags, spec: string | undefined, engines: number): Promise<FleetRun> {
  const byTopic = o.zmqRanks === 'topic';
  if (byTopic && o.zmq!.includes('*')) {
    throw new Error(`--zmq-ranks topic: every engine connects to ${o.zmq}; give the address of the router's bound socket, not a wildcard`);
  }
  const p = parseFleetOptions(options); // before any socket: bad options fail at once
  const wire = { format: o.eventsFormat, blockHashes: o.eventHashes };
  const publishers: ZmqEventPublisher[] = [];
  try {
    for (let e = 0; e < engines; e++) {
      publishers.push(
        await ZmqEventPublisher.create({
          endpoint: byTopic ? o.zmq! : rankEndpoint(o.zmq!, e),
          ...(byTopic && { mode: 'connect' as const }),
          topic: kvEventsTopic(engineInstance(e), o.zmqModel),
          ...(o.zmqReplay !== undefined && { replayEndpoint: rankEndpoint(o.zmqReplay, e) }),
          bufferSteps: o.zmqBuffer,
        }),
      );
      const pub = publishers[e]!;
      process.stderr.write(`kvpool: engine ${e} publishes on ${pub.endpoint} topic ${pub.topic}${pub.replayEndpoint ? `, replays on ${pub.replayEndpoint}` : ''}\n`);
    }
    if (o.zmqDelay > 0) await sleep(o.zmqDelay);
    const sink: FleetEventSink = (e, batches) => {
      for (const b of batches) void publishers[e]!.publish(b);
    };
    const settle = async () => {
      await Promise.all(publishers.map((x) => x.flushed()));
    };
    let result: FleetRun;
    if (p.threads > 0) result = await fleetOnThreadsOf(options, p, spec, { sink, settle, wire });
    else {
      const fleet = new Fleet(options, spec, sink, p, wire);
      try {
        while (fleet.step()) await settle();
        result = fleet.result();
      } finally {
        fleet.dispose();
      }
    }
    await settle();
    if (o.zmqHold > 0) {
      process.stderr.write(`kvpool: fleet done; the publishers stay open ${o.zmqHold} s\n`);
      await sleep(o.zmqHold);
    }
    return result;
  } finally {
    for (const x of publishers) x.close();
  }
}
