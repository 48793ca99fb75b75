// A ZeroMQ PUB socket that publishes KV-event batches the way vLLM does:
// three frames per message, the topic, an 8-byte big-endian sequence number
// (0, 1, 2, ... per publisher) and the msgpack payload. `zeromq` is an
// optional dependency, loaded on first use.

import type { KVEvent } from '../managers/kv-events.js';
import { encodeVllmEventBatches, type VllmEncodeOptions } from '../events/vllm.js';
import { checkKeys, checkObject, describe } from '../validate.js';

export interface ZmqPublisherOptions {
  /** ZeroMQ endpoint (default "tcp://*:5557", vLLM's default). */
  endpoint?: string;
  /** Bind (default) or connect to the endpoint. */
  mode?: 'bind' | 'connect';
  /** First frame of every message (vLLM: `kv@<instance>@<model>`, see kvEventsTopic). Default "". */
  topic?: string;
  /** Send high-water mark (default 100000, as vLLM). */
  highWaterMark?: number;
}

// The part of zeromq's API used here, typed locally so that the package
// compiles (and type-checks) where the optional dependency is not installed.
interface Publisher {
  bind(endpoint: string): Promise<void>;
  connect(endpoint: string): void;
  send(frames: Uint8Array[]): Promise<void>;
  close(): void;
  readonly lastEndpoint: string | null;
}
interface ZmqModule {
  Publisher: new (options: { sendHighWaterMark: number; linger: number }) => Publisher;
}

const ZEROMQ = 'zeromq'; // a variable: the import is not resolved at compile time

/** Loads the optional `zeromq` package, or throws an error saying how to get it. */
async function loadZeroMQ(): Promise<ZmqModule> {
  try {
    return (await import(ZEROMQ)) as ZmqModule;
  } catch (e) {
    throw new Error(
      `kvpool: the ZeroMQ publisher needs the optional dependency "zeromq" (npm install zeromq): ${(e as Error).message}`,
    );
  }
}

export class ZmqEventPublisher {
  /** The endpoint the socket is bound or connected to (a wildcard port resolved). */
  readonly endpoint: string;
  readonly topic: string;
  private seq = 0n;
  private readonly topicBytes: Uint8Array;
  private closed = false;
  /** Sends in call order: a zeromq socket takes one send at a time. */
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly socket: Publisher,
    endpoint: string,
    topic: string,
  ) {
    this.endpoint = endpoint;
    this.topic = topic;
    this.topicBytes = new TextEncoder().encode(topic);
  }

  static async create(options: ZmqPublisherOptions = {}): Promise<ZmqEventPublisher> {
    checkObject('options', options);
    checkKeys('options', options, ['endpoint', 'mode', 'topic', 'highWaterMark']);
    const endpoint = options.endpoint ?? 'tcp://*:5557';
    const mode = options.mode ?? 'bind';
    const topic = options.topic ?? '';
    const hwm = options.highWaterMark ?? 100_000;
    if (typeof endpoint !== 'string') throw new TypeError(`options.endpoint must be a string, got ${describe(endpoint)}`);
    if (mode !== 'bind' && mode !== 'connect') throw new RangeError(`options.mode must be "bind" or "connect", got ${describe(mode)}`);
    if (typeof topic !== 'string') throw new TypeError(`options.topic must be a string, got ${describe(topic)}`);
    if (!Number.isInteger(hwm) || hwm < 0) throw new RangeError(`options.highWaterMark must be an integer >= 0, got ${describe(hwm)}`);
    const zmq = await loadZeroMQ();
    const socket = new zmq.Publisher({ sendHighWaterMark: hwm, linger: 0 });
    try {
      if (mode === 'bind') await socket.bind(endpoint);
      else socket.connect(endpoint);
    } catch (e) {
      socket.close();
      throw e;
    }
    return new ZmqEventPublisher(socket, socket.lastEndpoint ?? endpoint, topic);
  }

  /**
   * Sends one payload as [topic, sequence number, payload] after every earlier
   * call's (calls need not be awaited one by one); resolves to its sequence number.
   */
  publish(payload: Uint8Array): Promise<bigint> {
    if (this.closed) return Promise.reject(new Error('kvpool: this publisher is closed'));
    if (!(payload instanceof Uint8Array)) {
      return Promise.reject(new TypeError(`payload must be a Uint8Array, got ${describe(payload)}`));
    }
    const seq = this.seq++;
    const seqBytes = new Uint8Array(8);
    new DataView(seqBytes.buffer).setBigUint64(0, seq, false);
    const sent = this.tail.then(() => this.socket.send([this.topicBytes, seqBytes, payload])).then(() => seq);
    this.tail = sent.catch(() => undefined);
    return sent;
  }

  /** Encodes drained events as vLLM KVEventBatch messages (one per dp rank) and publishes them in order. */
  async publishEvents(events: readonly KVEvent[], options?: VllmEncodeOptions): Promise<void> {
    await Promise.all(encodeVllmEventBatches(events, options).map((b) => this.publish(b.payload)));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close();
  }
}
