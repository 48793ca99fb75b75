// A ZeroMQ publisher of KV-event batches that works as vLLM's does (see
// docs/events.md): a PUB socket sending three frames per message (the topic,
// an 8-byte big-endian sequence number 0, 1, 2, ... and the msgpack payload),
// and optionally a ROUTER socket serving replays of the last batches to a
// subscriber that missed some. One publisher is one stream (vLLM: one per dp
// rank); `forRanks` makes one per rank, on vLLM's port-per-rank endpoints or
// on one endpoint with a topic per rank. `zeromq` is an optional dependency,
// loaded on first use.

import type { KVEvent } from '../managers/kv-events.js';
import { encodeVllmEventBatches, kvEventsTopic, type VllmEncodeOptions } from '../events/vllm.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';

/**
 * How replies to a replay request are framed (after the requester's identity
 * and the empty delimiter): `'topic'`, vLLM 0.26 on: [topic, seq, payload] per
 * batch, then ["", -1, ""]; `'seq'`, earlier vLLM (and Dynamo's indexer as of
 * this writing): [seq, payload], then [-1, ""].
 */
export type ReplayFrames = 'topic' | 'seq';

export interface ZmqPublisherOptions {
  /** ZeroMQ endpoint (default "tcp://*:5557", vLLM's default). */
  endpoint?: string;
  /**
   * Bind or connect to the endpoint. Default as vLLM decides: bind when the
   * endpoint has a wildcard ("*" or "::") or is ipc:// or inproc://, else connect.
   */
  mode?: 'bind' | 'connect';
  /** First frame of every message (vLLM: `kv@<instance>@<model>`, see kvEventsTopic). Default "". */
  topic?: string;
  /** Send high-water mark (default 100000, as vLLM). */
  highWaterMark?: number;
  /** A ROUTER endpoint (always bound) that replays buffered batches on request; default none. */
  replayEndpoint?: string;
  /** Batches kept for replays (default 10000, as vLLM). */
  bufferSteps?: number;
  /** Reply framing of the replay endpoint (default 'topic'). */
  replayFrames?: ReplayFrames;
  /**
   * Largest frame a replay request may have, in bytes (default 64; a request
   * is an empty frame and an 8-byte sequence number). libzmq drops a larger
   * frame and disconnects its sender before the frame is buffered.
   */
  replayMaxRequestBytes?: number;
  /** Requests waiting to be answered, per client (the ROUTER's receive high-water mark; default 16). */
  replayQueue?: number;
  /**
   * Milliseconds one reply's send may wait for a client that does not read
   * (default 10000); then the reply is abandoned without its end marker and
   * the next request is served.
   */
  replaySendTimeoutMs?: number;
}

/** What the replay endpoint did (docs/events.md, limits of the replay endpoint). */
export interface ReplayStats {
  /** Replies sent whole, end marker included. */
  served: number;
  /** Of them, replies that began after the requested sequence number (the buffer had moved on). */
  partial: number;
  /** Requests of the wrong shape, ignored. */
  ignored: number;
  /** Replies abandoned (the client did not read within the send timeout, or went away). */
  abandoned: number;
}

/** Options of `forRanks`: one publisher per dp rank. */
export interface ZmqRankPublishersOptions extends Omit<ZmqPublisherOptions, 'topic'> {
  /**
   * 'port' (vLLM's convention, the default): rank r's endpoints are the given
   * ones with the port plus r (inproc/ipc: a "_dp<r>" suffix), one topic.
   * 'topic': every rank on the same endpoint (connect: a router's bound
   * socket, as llm-d's central indexer), each with its own topic
   * kvEventsTopic(instance, model, r), so each rank is a pod to llm-d; replay
   * endpoints still take port + r.
   */
  ranks?: 'port' | 'topic';
  /** With ranks 'port': the topic of every rank (default ""). */
  topic?: string;
  /** With ranks 'topic': the instance and model of the topics. */
  instance?: string;
  model?: string;
}

// The part of zeromq's API used here, typed locally so that the package
// compiles (and type-checks) where the optional dependency is not installed.
interface Socket {
  bind(endpoint: string): Promise<void>;
  connect(endpoint: string): void;
  send(frames: (Uint8Array | string)[]): Promise<void>;
  close(): void;
  readonly lastEndpoint: string | null;
}
interface RouterSocket extends Socket {
  receive(): Promise<Uint8Array[]>;
}
interface RouterOptions {
  linger: number;
  /** Block (up to sendTimeout) at the high-water mark instead of dropping silently. */
  mandatory: boolean;
  maxMessageSize: number;
  receiveHighWaterMark: number;
  sendTimeout: number;
}
interface ZmqModule {
  Publisher: new (options: { sendHighWaterMark: number; linger: number }) => Socket;
  Router: new (options: RouterOptions) => RouterSocket;
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

/**
 * vLLM's endpoint of dp rank `dpRank`: the port plus the rank for tcp, a
 * "_dp<rank>" suffix for inproc and ipc; rank 0's is the endpoint itself.
 */
export function rankEndpoint(endpoint: string, dpRank: number): string {
  if (typeof endpoint !== 'string') throw new TypeError(`endpoint must be a string, got ${describe(endpoint)}`);
  checkInt('dpRank', dpRank, 0);
  if (dpRank === 0) return endpoint;
  if (endpoint.startsWith('inproc://') || endpoint.startsWith('ipc://')) return `${endpoint}_dp${dpRank}`;
  const m = /^(tcp:\/\/.*):(\d+)$/.exec(endpoint);
  if (!m) throw new RangeError(`endpoint must be tcp://host:port, ipc:// or inproc:// to take a port per rank, got ${JSON.stringify(endpoint)}`);
  const port = Number(m[2]) + dpRank;
  if (port > 65535) throw new RangeError(`rank ${dpRank}'s port ${port} of ${JSON.stringify(endpoint)} is past 65535`);
  return `${m[1]}:${port}`;
}

/** vLLM's rule: bind a wildcard, ipc or inproc endpoint, connect to any other. */
function defaultMode(endpoint: string): 'bind' | 'connect' {
  return endpoint.includes('*') || endpoint.includes('::') || endpoint.startsWith('ipc://') || endpoint.startsWith('inproc://') ? 'bind' : 'connect';
}

const END_SEQ = new Uint8Array(8).fill(0xff); // -1, 8 bytes big endian

function seqBytes(seq: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, seq, false);
  return b;
}

const OPTION_KEYS = ['endpoint', 'mode', 'topic', 'highWaterMark', 'replayEndpoint', 'bufferSteps', 'replayFrames', 'replayMaxRequestBytes', 'replayQueue', 'replaySendTimeoutMs'];

interface Parsed {
  endpoint: string;
  mode: 'bind' | 'connect';
  topic: string;
  hwm: number;
  replayEndpoint: string | null;
  bufferSteps: number;
  replayFrames: ReplayFrames;
  maxRequestBytes: number;
  queue: number;
  sendTimeoutMs: number;
}

function parse(options: ZmqPublisherOptions, keys: readonly string[]): Parsed {
  checkObject('options', options);
  checkKeys('options', options, keys);
  const endpoint = options.endpoint ?? 'tcp://*:5557';
  if (typeof endpoint !== 'string' || endpoint === '') throw new TypeError(`options.endpoint must be a non-empty string, got ${describe(endpoint)}`);
  const mode = options.mode ?? defaultMode(endpoint);
  if (mode !== 'bind' && mode !== 'connect') throw new RangeError(`options.mode must be "bind" or "connect", got ${describe(mode)}`);
  const topic = options.topic ?? '';
  if (typeof topic !== 'string') throw new TypeError(`options.topic must be a string, got ${describe(topic)}`);
  const hwm = options.highWaterMark ?? 100_000;
  if (!Number.isInteger(hwm) || hwm < 0) throw new RangeError(`options.highWaterMark must be an integer >= 0, got ${describe(hwm)}`);
  const replayEndpoint = options.replayEndpoint ?? null;
  if (replayEndpoint !== null && (typeof replayEndpoint !== 'string' || replayEndpoint === '')) {
    throw new TypeError(`options.replayEndpoint must be a non-empty string, got ${describe(replayEndpoint)}`);
  }
  const bufferSteps = options.bufferSteps ?? 10_000;
  if (!Number.isInteger(bufferSteps) || bufferSteps < 1) throw new RangeError(`options.bufferSteps must be an integer >= 1, got ${describe(bufferSteps)}`);
  const replayFrames = options.replayFrames ?? 'topic';
  if (replayFrames !== 'topic' && replayFrames !== 'seq') throw new RangeError(`options.replayFrames must be "topic" or "seq", got ${describe(replayFrames)}`);
  const maxRequestBytes = checkInt('options.replayMaxRequestBytes', options.replayMaxRequestBytes ?? 64, 8, 1 << 20);
  const queue = checkInt('options.replayQueue', options.replayQueue ?? 16, 1, 100_000);
  const sendTimeoutMs = checkInt('options.replaySendTimeoutMs', options.replaySendTimeoutMs ?? 10_000, 1, 3_600_000);
  return { endpoint, mode, topic, hwm, replayEndpoint, bufferSteps, replayFrames, maxRequestBytes, queue, sendTimeoutMs };
}

export class ZmqEventPublisher {
  /** The endpoint the socket is bound or connected to (a wildcard port resolved). */
  readonly endpoint: string;
  /** The replay endpoint bound (a wildcard port resolved), or null. */
  readonly replayEndpoint: string | null;
  readonly topic: string;
  private seq = 0n;
  private readonly topicBytes: Uint8Array;
  private closed = false;
  /** Sends in call order: a zeromq socket takes one send at a time. */
  private tail: Promise<unknown> = Promise.resolve();
  /** The last batches sent, oldest first, for replays. */
  private readonly buffer: Array<{ seq: bigint; payload: Uint8Array }> = [];
  private bufferHead = 0;
  private readonly stats: ReplayStats = { served: 0, partial: 0, ignored: 0, abandoned: 0 };

  private constructor(
    private readonly socket: Socket,
    private readonly router: RouterSocket | null,
    p: Parsed,
    endpoint: string,
    replayEndpoint: string | null,
  ) {
    this.endpoint = endpoint;
    this.replayEndpoint = replayEndpoint;
    this.topic = p.topic;
    this.topicBytes = new TextEncoder().encode(p.topic);
    this.bufferSteps = p.bufferSteps;
    this.replayFrames = p.replayFrames;
    if (router !== null) void this.serveReplays(router);
  }

  private readonly bufferSteps: number;
  private readonly replayFrames: ReplayFrames;

  static async create(options: ZmqPublisherOptions = {}): Promise<ZmqEventPublisher> {
    const p = parse(options, OPTION_KEYS);
    const zmq = await loadZeroMQ();
    const socket = new zmq.Publisher({ sendHighWaterMark: p.hwm, linger: 0 });
    let router: RouterSocket | null = null;
    try {
      if (p.mode === 'bind') await socket.bind(p.endpoint);
      else socket.connect(p.endpoint);
      if (p.replayEndpoint !== null) {
        // mandatory: at the high-water mark a send waits (the reply stays whole) instead of dropping batches silently.
        router = new zmq.Router({ linger: 0, mandatory: true, maxMessageSize: p.maxRequestBytes, receiveHighWaterMark: p.queue, sendTimeout: p.sendTimeoutMs });
        await router.bind(p.replayEndpoint);
      }
    } catch (e) {
      socket.close();
      router?.close();
      throw e;
    }
    return new ZmqEventPublisher(socket, router, p, socket.lastEndpoint ?? p.endpoint, router === null ? null : (router.lastEndpoint ?? p.replayEndpoint));
  }

  /**
   * One publisher per dp rank of a pool, rank r publishing its batches
   * (see ZmqRankPublishersOptions for the endpoints and topics). On an
   * error, the ones made are closed.
   */
  static async forRanks(dpSize: number, options: ZmqRankPublishersOptions = {}): Promise<ZmqEventPublisher[]> {
    checkInt('dpSize', dpSize, 1);
    const keys = [...OPTION_KEYS, 'ranks', 'instance', 'model'];
    const p = parse({ ...options, topic: options.topic ?? '' } as ZmqPublisherOptions, keys);
    const ranks = options.ranks ?? 'port';
    if (ranks !== 'port' && ranks !== 'topic') throw new RangeError(`options.ranks must be "port" or "topic", got ${describe(ranks)}`);
    if (ranks === 'topic') {
      if (options.topic !== undefined) throw new TypeError('options.topic: with ranks "topic" each rank\'s topic comes from options.instance and options.model');
      kvEventsTopic(options.instance as string, options.model as string);
      if (dpSize > 1 && p.mode === 'bind') {
        throw new RangeError('ranks "topic" puts every rank on one endpoint: the ranks connect to it (mode "connect"); to bind, use ranks "port"');
      }
    } else if (options.instance !== undefined || options.model !== undefined) {
      throw new TypeError('options.instance and options.model name the topics of ranks "topic"; with ranks "port" give options.topic');
    }
    const out: ZmqEventPublisher[] = [];
    try {
      for (let r = 0; r < dpSize; r++) {
        out.push(
          await ZmqEventPublisher.create({
            endpoint: ranks === 'port' ? rankEndpoint(p.endpoint, r) : p.endpoint,
            mode: p.mode,
            topic: ranks === 'port' ? p.topic : kvEventsTopic(options.instance!, options.model!, r),
            highWaterMark: p.hwm,
            ...(p.replayEndpoint !== null && { replayEndpoint: rankEndpoint(p.replayEndpoint, r) }),
            bufferSteps: p.bufferSteps,
            replayFrames: p.replayFrames,
            replayMaxRequestBytes: p.maxRequestBytes,
            replayQueue: p.queue,
            replaySendTimeoutMs: p.sendTimeoutMs,
          }),
        );
      }
    } catch (e) {
      for (const x of out) x.close();
      throw e;
    }
    return out;
  }

  /**
   * Sends one payload as [topic, sequence number, payload] after every earlier
   * call's (calls need not be awaited one by one), and keeps it for replays;
   * resolves to its sequence number.
   */
  publish(payload: Uint8Array): Promise<bigint> {
    if (this.closed) return Promise.reject(new Error('kvpool: this publisher is closed'));
    if (!(payload instanceof Uint8Array)) {
      return Promise.reject(new TypeError(`payload must be a Uint8Array, got ${describe(payload)}`));
    }
    const seq = this.seq++;
    this.keep(seq, payload);
    const sent = this.tail.then(() => this.socket.send([this.topicBytes, seqBytes(seq), payload])).then(() => seq);
    this.tail = sent.catch(() => undefined);
    return sent;
  }

  /** What the replay endpoint answered and refused so far (a copy). */
  get replayStats(): ReplayStats {
    return { ...this.stats };
  }

  /** Resolves once every publish so far went out (or failed). */
  flushed(): Promise<void> {
    return this.tail.then(() => undefined);
  }

  /** Encodes events as vLLM KVEventBatch messages (one per dp rank) and publishes them in order. */
  async publishEvents(events: readonly KVEvent[], options?: VllmEncodeOptions): Promise<void> {
    await Promise.all(encodeVllmEventBatches(events, options).map((b) => this.publish(b.payload)));
  }

  private keep(seq: bigint, payload: Uint8Array): void {
    if (this.router === null) return;
    this.buffer.push({ seq, payload });
    if (this.buffer.length - this.bufferHead > this.bufferSteps) {
      this.bufferHead++;
      if (this.bufferHead > 1024 && this.bufferHead * 2 > this.buffer.length) {
        this.buffer.splice(0, this.bufferHead);
        this.bufferHead = 0;
      }
    }
  }

  /** Answers replay requests until closed: [identity, "", start seq (8 bytes big endian)]. */
  private async serveReplays(router: RouterSocket): Promise<void> {
    while (!this.closed) {
      let frames: Uint8Array[];
      try {
        frames = await router.receive();
      } catch {
        return; // closed
      }
      // vLLM's check: three frames (identity, delimiter, start); anything else is ignored.
      if (frames.length !== 3 || frames[2]!.length !== 8) {
        this.stats.ignored++;
        continue;
      }
      const [id, delim, start] = frames as [Uint8Array, Uint8Array, Uint8Array];
      const from = new DataView(start.buffer, start.byteOffset, 8).getBigUint64(0, false);
      const topic = this.replayFrames === 'topic';
      try {
        // A snapshot of the buffer: batches published meanwhile come live.
        // Every buffered batch from `from` on, contiguous: a gap can only be at the start, where the
        // first sequence number is past `from` (the batches before it left the buffer).
        const batches = this.buffer.slice(this.bufferHead).filter((b) => b.seq >= from);
        for (const b of batches) {
          await router.send(topic ? [id, delim, this.topicBytes, seqBytes(b.seq), b.payload] : [id, delim, seqBytes(b.seq), b.payload]);
        }
        await router.send(topic ? [id, delim, new Uint8Array(0), END_SEQ, new Uint8Array(0)] : [id, delim, END_SEQ, new Uint8Array(0)]);
        this.stats.served++;
        if (from < this.seq && (batches.length === 0 || batches[0]!.seq > from)) this.stats.partial++;
      } catch {
        // The client did not read within the send timeout, or went away: the reply ends without its end marker.
        if (this.closed) return;
        this.stats.abandoned++;
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close();
    this.router?.close();
  }
}
