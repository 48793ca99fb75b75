// Node-only: reads a JSONL trace into compact requests, streaming (the
// 12,031-request conversation trace needs a few MB this way). A trace is a
// file (plain or gzip, told by its first bytes, not its name), `-` for
// standard input, or the name of a trace shipped in the package's traces/.

import { createReadStream, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createGunzip } from 'node:zlib';
import { Readable } from 'node:stream';
import { parseTraceLine, TraceError, type TraceRequest } from '../replay/trace.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';

/** The traces shipped in the package (see traces/README.md for where they come from). */
export const BUILTIN_TRACES: Readonly<Record<string, { file: string; description: string }>> = {
  'mooncake-conversation': {
    file: fileURLToPath(new URL('../../traces/mooncake-conversation.jsonl.gz', import.meta.url)),
    description: "Mooncake FAST'25 conversation trace (12,031 requests, Apache-2.0)",
  },
};

/** Longest line read before giving up (a real line holds a few KB). */
export const MAX_TRACE_LINE_BYTES = 64 << 20;

export interface ReadTraceOptions {
  /** Read at most this many requests (default all; Infinity is all too). */
  limit?: number;
  /** Where `-` reads from (default process.stdin). */
  stdin?: Readable;
  /** A longer line is rejected with its number (default MAX_TRACE_LINE_BYTES). */
  maxLineBytes?: number;
}

/** Where a trace argument points: a file (built-in names resolved) or standard input. */
export function resolveTrace(spec: string): { path: string } | { stdin: true } {
  if (typeof spec !== 'string' || spec === '') throw new TypeError(`trace must be a file name, "-" or a built-in trace name, got ${JSON.stringify(spec)}`);
  if (spec === '-') return { stdin: true };
  if (existsSync(spec)) return { path: spec };
  const builtin = BUILTIN_TRACES[spec];
  if (builtin) return { path: builtin.file };
  throw new Error(`cannot read trace ${JSON.stringify(spec)}: no such file (built-in traces: ${Object.keys(BUILTIN_TRACES).join(', ')})`);
}

/**
 * Takes a trace's lines in order into `out` (a line's bytes without its
 * newline; a leading byte-order mark and a CR before the newline dropped;
 * blank lines skipped), numbering them for errors; `take` answers whether
 * more are wanted (fewer than `limit` requests so far).
 */
export function lineTaker(out: TraceRequest[], limit: number): { take(bytes: Buffer): boolean; readonly line: number } {
  let line = 0;
  return {
    get line() {
      return line;
    },
    take(bytes: Buffer): boolean {
      line++;
      let text = bytes.toString('utf8');
      if (line === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      if (text.endsWith('\r')) text = text.slice(0, -1);
      const r = parseTraceLine(text, line);
      if (r) out.push(r);
      return out.length < limit;
    },
  };
}

/** What a failed read of trace `spec` throws: a TraceError as it is; a read or gunzip error as one line naming the trace. */
export function readFailure(e: unknown, spec: string, where: { path: string } | { stdin: true }): Error {
  if (e instanceof TraceError) return e;
  const err = e as NodeJS.ErrnoException;
  const what = 'stdin' in where ? 'standard input' : JSON.stringify(spec);
  const why = err.code === 'ENOENT' ? 'no such file' : err.code?.startsWith('Z_') ? `not a valid gzip stream (${err.message})` : err.message;
  return new Error(`cannot read trace ${what}: ${why}`);
}

/**
 * Reads a Mooncake-style JSONL trace: a `.jsonl` or gzipped file, `-` for
 * standard input, or a built-in trace's name. A malformed line throws a
 * TraceError with its line number; a leading UTF-8 byte-order mark is skipped.
 */
export async function readTraceFile(spec: string, limitOrOptions: number | ReadTraceOptions = {}): Promise<TraceRequest[]> {
  const { limit, maxLine, stdin } = readOptions(limitOrOptions);
  const where = resolveTrace(spec);
  const source: Readable = 'stdin' in where ? (stdin ?? process.stdin) : createReadStream(where.path);
  const out: TraceRequest[] = [];
  if (limit === 0) {
    if (!('stdin' in where)) source.destroy();
    return out;
  }
  const taker = lineTaker(out, limit);
  const take = taker.take;
  try {
    let parts: Buffer[] = [];
    let partBytes = 0;
    read: for await (const chunk of decompressed(source)) {
      const buf = chunk as Buffer;
      let start = 0;
      for (let nl = buf.indexOf(10, start); nl !== -1; nl = buf.indexOf(10, start)) {
        const piece = buf.subarray(start, nl);
        if (partBytes + piece.length > maxLine) throw tooLong(taker.line + 1, maxLine);
        const whole = parts.length === 0 ? piece : Buffer.concat([...parts, piece]);
        parts = [];
        partBytes = 0;
        start = nl + 1;
        if (!take(whole)) break read;
      }
      if (start < buf.length) {
        partBytes += buf.length - start;
        if (partBytes > maxLine) throw tooLong(taker.line + 1, maxLine);
        parts.push(buf.subarray(start));
      }
    }
    if (partBytes > 0 && out.length < limit) take(Buffer.concat(parts));
  } catch (e) {
    throw readFailure(e, spec, where);
  } finally {
    if (!('stdin' in where)) source.destroy();
  }
  return out;
}

/** A count of requests, or Infinity for all of them. */
function checkLimit(name: string, v: unknown): number {
  return v === Infinity ? v : checkInt(name, v, 0, Number.MAX_SAFE_INTEGER);
}

/** readTraceFile's second argument, checked: a limit, or the options. */
function readOptions(v: number | ReadTraceOptions): { limit: number; maxLine: number; stdin: Readable | undefined } {
  if (typeof v === 'number') return { limit: checkLimit('limit', v), maxLine: MAX_TRACE_LINE_BYTES, stdin: undefined };
  checkObject('options', v);
  checkKeys('options', v, ['limit', 'stdin', 'maxLineBytes']);
  const limit = v.limit === undefined ? Infinity : checkLimit('options.limit', v.limit);
  const maxLine = v.maxLineBytes === undefined ? MAX_TRACE_LINE_BYTES : checkInt('options.maxLineBytes', v.maxLineBytes, 1, Number.MAX_SAFE_INTEGER);
  const stdin = v.stdin;
  if (stdin !== undefined && (stdin === null || typeof (stdin as Partial<Readable>)[Symbol.asyncIterator] !== 'function')) {
    throw new TypeError(`options.stdin must be a readable stream, got ${describe(stdin)}`);
  }
  return { limit, maxLine, stdin };
}

/** The refusal of line `line`, longer than `max` bytes. */
export function tooLong(line: number, max: number): TraceError {
  return new TraceError(line, `longer than ${max} bytes (not a JSONL trace?)`);
}

/** The source's bytes, gunzipped when they start with gzip's magic number. */
async function* decompressed(source: Readable): AsyncGenerator<Buffer> {
  const it = source[Symbol.asyncIterator]() as AsyncIterator<Buffer | string>;
  let first = await it.next();
  while (!first.done && first.value.length === 0) first = await it.next();
  if (first.done) return;
  const head = typeof first.value === 'string' ? Buffer.from(first.value) : first.value;
  const rest = async function* () {
    yield head;
    for (let n = await it.next(); !n.done; n = await it.next()) yield typeof n.value === 'string' ? Buffer.from(n.value) : n.value;
  };
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) {
    const gunzip = createGunzip();
    const input = Readable.from(rest());
    input.on('error', (e) => gunzip.destroy(e));
    input.pipe(gunzip);
    try {
      yield* gunzip as AsyncIterable<Buffer>;
    } finally {
      input.destroy();
      gunzip.destroy();
    }
  } else yield* rest();
}
