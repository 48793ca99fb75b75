// `kvpool fleet --zmq`: every engine publishes its KV events as a vLLM
// engine does, on its own endpoint (the given port + engine index) with the
// topic kv@engine-<e>@<model>, so llm-d sees each engine as a pod and Dynamo
// as a worker. The fleet is stepped one step at a time, yielding while the
// step's batches are sent (and replay requests served).

import type { Command } from 'commander';
import { kvEventsTopic } from '../events/vllm.js';
import { Fleet } from '../fleet/fleet.js';
import type { FleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { engineInstance } from '../fleet/precise-prefix.js';
import { rankEndpoint, ZmqEventPublisher } from '../node/zmq-publisher.js';
import { parseIntArg, seconds } from './options.js';

export interface FleetZmqFlags {
  zmq?: string;
  zmqReplay?: string;
  zmqModel: string;
  zmqBuffer: number;
  zmqDelay: number;
  zmqHold: number;
}

export function addFleetZmqOptions(cmd: Command): Command {
  return cmd
    .option('--zmq <endpoint>', 'publish each engine\'s KV events on ZeroMQ as vLLM does: engine e on the endpoint\'s port + e, topic kv@engine-<e>@<model>')
    .option('--zmq-replay <endpoint>', 'with --zmq: serve replays of recent batches (engine e on port + e)')
    .option('--zmq-model <name>', 'with --zmq: the model part of the topics', 'kvpool')
    .option('--zmq-buffer <n>', 'with --zmq-replay: batches kept for replays per engine', (v: string) => parseIntArg('--zmq-buffer', 1, v), 10000)
    .option('--zmq-delay <seconds>', 'with --zmq: wait this long before the first step (subscribers connecting)', seconds('--zmq-delay'), 0)
    .option('--zmq-hold <seconds>', 'with --zmq: keep the sockets open this long after the run (replays still served)', seconds('--zmq-hold'), 0);
}

const sleep = (s: number) => new Promise<void>((resolve) => setTimeout(resolve, s * 1000));

/** Runs the fleet with every engine publishing (see the file's header). */
export async function fleetPublishing(options: FleetOptions, o: FleetZmqFlags, spec: string | undefined, engines: number): Promise<FleetRun> {
  const publishers: ZmqEventPublisher[] = [];
  try {
    for (let e = 0; e < engines; e++) {
      publishers.push(
        await ZmqEventPublisher.create({
          endpoint: rankEndpoint(o.zmq!, e),
          topic: kvEventsTopic(engineInstance(e), o.zmqModel),
          ...(o.zmqReplay !== undefined && { replayEndpoint: rankEndpoint(o.zmqReplay, e) }),
          bufferSteps: o.zmqBuffer,
        }),
      );
      const p = publishers[e]!;
      process.stderr.write(`kvpool: engine ${e} publishes on ${p.endpoint} topic ${p.topic}${p.replayEndpoint ? `, replays on ${p.replayEndpoint}` : ''}\n`);
    }
    if (o.zmqDelay > 0) await sleep(o.zmqDelay);
    const fleet = new Fleet(options, spec, (e, batches) => {
      for (const b of batches) void publishers[e]!.publish(b);
    });
    let result: FleetRun;
    try {
      while (fleet.step()) await Promise.all(publishers.map((p) => p.flushed()));
      result = fleet.result();
    } finally {
      fleet.dispose();
    }
    await Promise.all(publishers.map((p) => p.flushed()));
    if (o.zmqHold > 0) {
      process.stderr.write(`kvpool: fleet done; the publishers stay open ${o.zmqHold} s\n`);
      await sleep(o.zmqHold);
    }
    return result;
  } finally {
    for (const p of publishers) p.close();
  }
}
