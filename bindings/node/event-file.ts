// Where `kvpool replay` sends KV-cache events: a file (--events FILE, a stream
// of vLLM KVEventBatch msgpack messages, one per dp rank per step, ts = the
// step) and/or ZeroMQ publishers (--zmq, one per rank). Batches are encoded
// once, straight from the core's records, and written in large chunks.

import { closeSync, openSync, writeSync } from 'node:fs';
import { drainInto, parseWireOptions, VllmWireEncoder, type VllmEncodeOptions } from '../events/vllm.js';
import type { ReplayStepHook } from '../replay/replay-events.js';
import type { VllmKvCacheManager } from '../vllm/kv-cache-manager.js';
import type { ZmqEventPublisher } from './zmq-publisher.js';

export interface EventOutputs {
  /** Drains the pool's events of step `step` into the outputs. */
  hook: ReplayStepHook;
  /** Drains a vLLM engine's events of step `step` (`kvs`: its ranks' managers, rank r's at index r) into the outputs. */
  vllmHook: (kvs: readonly VllmKvCacheManager[], step: number) => void;
  /** Writes what is buffered and closes the file (the publishers are the caller's). */
  close: () => void;
}

/** Bytes gathered before a write. */
const CHUNK = 8 << 20;

/**
 * Opens `file` (if given) for writing; the hook encodes each step's batches
 * and appends them to the file and/or publishes each rank's on `publishers[rank]`.
 */
export function eventOutputs(file: string | null, publishers: readonly ZmqEventPublisher[] | null, options: Omit<VllmEncodeOptions, 'ts'> = {}): EventOutputs {
  const enc = new VllmWireEncoder(parseWireOptions(options));
  let fd = -1;
  if (file !== null) {
    try {
      fd = openSync(file, 'w');
    } catch (e) {
      throw new Error(`cannot write events to ${JSON.stringify(file)}: ${(e as Error).message}`);
    }
  }
  // Written synchronously in large chunks: on a busy 2-core machine a writer
  // thread measured no faster (see bench/README.md).
  const write = () => {
    const b = enc.bytes();
    if (fd >= 0) for (let off = 0; off < b.length; ) off += writeSync(fd, b, off, b.length - off);
    enc.reset();
  };
  const publish =
    publishers === null
      ? () => {}
      : (dpRank: number, start: number) => {
          const pub = publishers[dpRank];
          if (pub === undefined) throw new Error(`kvpool: events of dp rank ${dpRank}, but ${publishers.length} publishers`);
          void pub.publish(enc.bytes().slice(start)).catch(() => {}); // a send that fails is a batch lost, as on a PUB socket
        };
  return {
    hook: (pool, step) => {
      // A file's batches are stamped with the step; live ones with the time, as vLLM does.
      drainInto(pool, enc, fd >= 0 ? step : Date.now() / 1000, publish);
      if (fd < 0 || enc.bytes().length >= CHUNK) write();
    },
    vllmHook: (kvs, step) => {
      const ts = fd >= 0 ? step : Date.now() / 1000;
      for (const kv of kvs) {
        const events = kv.drainEvents();
        if (events.length === 0) continue;
        enc.beginBatch(ts);
        enc.events(events);
        publish(kv.dpRank, enc.endBatch(kv.dpRank));
      }
      if (fd < 0 || enc.bytes().length >= CHUNK) write();
    },
    close: () => {
      try {
        write();
      } finally {
        if (fd >= 0) closeSync(fd);
        fd = -1;
      }
    },
  };
}
