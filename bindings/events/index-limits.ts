// What a KVEventIndex accepts from a stream: the bounds that keep the memory
// and time one batch, one engine or one stream costs in proportion to what a
// real engine sends (docs/events.md, limits). Every bound is an option.

import { checkInt, checkKeys, checkObject } from '../validate.js';

export interface KVEventIndexLimits {
  /** Largest block size a stored event may have (tokens; default 4096). */
  maxBlockSize: number;
  /** Highest data-parallel rank (default 1023). */
  maxDpRank: number;
  /** Media (GPU, CPU, ...) one rank may hold blocks on (default 8). */
  maxMediaPerRank: number;
  /** Longest instance, medium, LoRA name or other string, in UTF-16 units (default 256). */
  maxNameLength: number;
  /** Events in one batch (default 65536). */
  maxEventsPerBatch: number;
  /** Block hashes in one event (default 65536: a prompt of a million tokens at 16 per block). */
  maxHashesPerEvent: number;
  /** Bytes of a bytes-form block hash (default 64). */
  maxHashBytes: number;
  /** Blocks one source (instance, rank, medium) may hold (default 4,194,304). */
  maxBlocksPerSource: number;
  /** Nesting of a block's extra keys (default 4: [[mm_hash, offset], ...] is 2). */
  maxExtraKeyDepth: number;
  /** Values in one block's extra keys, nested ones counted (default 256). */
  maxExtraKeyValues: number;
}

export const DEFAULT_INDEX_LIMITS: Readonly<KVEventIndexLimits> = Object.freeze({
  maxBlockSize: 4096,
  maxDpRank: 1023,
  maxMediaPerRank: 8,
  maxNameLength: 256,
  maxEventsPerBatch: 65536,
  maxHashesPerEvent: 65536,
  maxHashBytes: 64,
  maxBlocksPerSource: 4_194_304,
  maxExtraKeyDepth: 4,
  maxExtraKeyValues: 256,
});

export const LIMIT_KEYS = Object.keys(DEFAULT_INDEX_LIMITS) as ReadonlyArray<keyof KVEventIndexLimits>;

/** The limits `given` asks for, the defaults for the rest (each an integer >= 1, rank >= 0). */
export function parseLimits(given: unknown): KVEventIndexLimits {
  if (given === undefined) return { ...DEFAULT_INDEX_LIMITS };
  checkObject('options.limits', given);
  checkKeys('options.limits', given as object, LIMIT_KEYS);
  const o = given as Partial<Record<keyof KVEventIndexLimits, unknown>>;
  const out = { ...DEFAULT_INDEX_LIMITS };
  for (const k of LIMIT_KEYS) {
    if (o[k] !== undefined) out[k] = checkInt(`options.limits.${k}`, o[k], k === 'maxDpRank' ? 0 : 1, 0x7fff_ffff);
  }
  return out;
}
