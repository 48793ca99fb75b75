// Mooncake-style trace requests: one JSON object per line with
// input_length, output_length and hash_ids (512-token content ids).

import { MAX_SEQUENCE_TOKENS } from '../validate.js';

export interface TraceRequest {
  inputLength: number;
  outputLength: number;
  /** Content id of each 512-token chunk of the prompt. */
  hashIds: Int32Array;
  timestamp?: number;
}

/** A malformed trace line, with its 1-based line number. */
export class TraceError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`trace line ${line}: ${message}`);
    this.name = 'TraceError';
  }
}

function field(obj: Record<string, unknown>, key: string, line: number): number {
  const v = obj[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0x7fffffff) {
    throw new TraceError(line, `"${key}" must be a non-negative integer, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** What a request's timestamp must be, for the errors that refuse one. */
export const TIMESTAMP_RULE = 'a number of milliseconds in [0, 2^53 - 1] (or absent)';

/** A request's timestamp as a fleet takes it: milliseconds, finite, not negative, within a double's integers. */
export function isTimestamp(ts: unknown): ts is number {
  return typeof ts === 'number' && ts >= 0 && ts <= Number.MAX_SAFE_INTEGER;
}

/** Parses one trace line (1-based `line` for messages); null for a blank line. */
export function parseTraceLine(text: string, line: number): TraceRequest | null {
  if (text.trim() === '') return null;
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (e) {
    throw new TraceError(line, `not valid JSON (${(e as Error).message})`);
  }
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new TraceError(line, 'not a JSON object');
  const o = obj as Record<string, unknown>;
  const inputLength = field(o, 'input_length', line);
  const outputLength = field(o, 'output_length', line);
  // Checked before anything is sized by them: a request's tokens must fit the 32-bit core.
  if (inputLength + outputLength > MAX_SEQUENCE_TOKENS) {
    throw new TraceError(line, `input_length + output_length = ${inputLength + outputLength} is more than a sequence can hold (${MAX_SEQUENCE_TOKENS} tokens)`);
  }
  const ids = o['hash_ids'];
  if (!Array.isArray(ids)) throw new TraceError(line, `"hash_ids" must be an array, got ${JSON.stringify(ids)}`);
  const need = Math.ceil(inputLength / 512);
  if (ids.length < need) {
    throw new TraceError(line, `"hash_ids" has ${ids.length} ids but input_length ${inputLength} needs ${need}`);
  }
  const hashIds = new Int32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const v = ids[i];
    // Prompt tokens are id * 512 + offset and must stay int32.
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 4194303) {
      throw new TraceError(line, `"hash_ids"[${i}] must be an integer in [0, 4194303], got ${JSON.stringify(v)}`);
    }
    hashIds[i] = v;
  }
  const ts = o['timestamp'];
  // A fleet places requests by it (a step count comes from it): absent, or a time in ms a step clock can count to.
  if (ts !== undefined && !isTimestamp(ts)) {
    throw new TraceError(line, `"timestamp" must be ${TIMESTAMP_RULE}, got ${typeof ts === 'number' ? ts : JSON.stringify(ts)}`);
  }
  return { inputLength, outputLength, hashIds, timestamp: ts };
}

/** Parses a whole trace held in memory (browsers: a dropped file's text); a leading byte-order mark is skipped. */
export function parseTrace(text: string): TraceRequest[] {
  if (typeof text !== 'string') throw new TypeError(`text must be a string, got ${typeof text}`);
  const out: TraceRequest[] = [];
  const lines = (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text).split('\n');
  for (let i = 0; i < lines.length; i++) {
    const r = parseTraceLine(lines[i]!, i + 1);
    if (r) out.push(r);
  }
  return out;
}
