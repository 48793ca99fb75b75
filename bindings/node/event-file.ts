// `kvpool replay --events FILE`: KV-cache events written as a stream of vLLM
// KVEventBatch msgpack messages (one per dp rank per step, ts = the step).

import { closeSync, openSync, writeSync } from 'node:fs';
import { encodeVllmEventBatches } from '../events/vllm.js';
import type { KVEvent } from '../managers/kv-events.js';

export interface EventFileSink {
  write: (events: KVEvent[], step: number) => void;
  close: () => void;
}

export function eventFileSink(path: string): EventFileSink {
  let fd: number;
  try {
    fd = openSync(path, 'w');
  } catch (e) {
    throw new Error(`cannot write events to ${JSON.stringify(path)}: ${(e as Error).message}`);
  }
  return {
    write: (events, step) => {
      for (const b of encodeVllmEventBatches(events, { ts: step })) writeSync(fd, b.payload);
    },
    close: () => closeSync(fd),
  };
}
