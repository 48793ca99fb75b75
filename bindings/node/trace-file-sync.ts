// Node-only: a trace read synchronously, for the calls that are synchronous
// (sloSearch). The same sources and rules as readTraceFile (a file, plain or
// gzip told by its first bytes, `-` for standard input, or a built-in
// trace's name); a plain file is read in chunks and stops at `limit`, a
// gzipped one is inflated whole first (the built-in trace: 0.8 MB to 3 MB).

import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import type { TraceRequest } from '../replay/trace.js';
import { checkInt } from '../validate.js';
import { lineTaker, MAX_TRACE_LINE_BYTES, readFailure, resolveTrace, tooLong } from './trace-file.js';

/** Chunks of the source's bytes: a plain file's as read, or a gzipped file's (or stdin's) inflated at once. */
function* chunksOf(where: ReturnType<typeof resolveTrace>): Generator<Buffer> {
  if ('stdin' in where) {
    const all = readFileSync(0);
    yield isGzip(all) ? gunzipSync(all) : all;
    return;
  }
  const fd = openSync(where.path, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    let n = readSync(fd, buf, 0, buf.length, null);
    if (n >= 2 && isGzip(buf)) {
      yield gunzipSync(readFileSync(where.path));
      return;
    }
    for (; n > 0; n = readSync(fd, buf, 0, buf.length, null)) yield buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

function isGzip(b: Buffer): boolean {
  return b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;
}

/** `readTraceFile`, synchronously: the first `limit` requests of a trace file, `-` or built-in trace. */
export function readTraceFileSync(spec: string, limit = Infinity): TraceRequest[] {
  if (limit !== Infinity) checkInt('limit', limit, 0, Number.MAX_SAFE_INTEGER);
  const where = resolveTrace(spec);
  const out: TraceRequest[] = [];
  if (limit === 0) return out;
  const taker = lineTaker(out, limit);
  const take = (bytes: Buffer): boolean => {
    if (bytes.length > MAX_TRACE_LINE_BYTES) throw tooLong(taker.line + 1, MAX_TRACE_LINE_BYTES);
    return taker.take(bytes);
  };
  try {
    let rest: Buffer = Buffer.alloc(0);
    read: for (const chunk of chunksOf(where)) {
      const buf = rest.length === 0 ? chunk : Buffer.concat([rest, chunk]);
      let start = 0;
      for (let nl = buf.indexOf(10, start); nl !== -1; nl = buf.indexOf(10, start)) {
        const more = take(buf.subarray(start, nl));
        start = nl + 1;
        if (!more) break read;
      }
      if (buf.length - start > MAX_TRACE_LINE_BYTES) throw tooLong(taker.line + 1, MAX_TRACE_LINE_BYTES);
      rest = Buffer.from(buf.subarray(start));
    }
    if (rest.length > 0 && out.length < limit) take(rest);
  } catch (e) {
    throw readFailure(e, spec, where);
  }
  return out;
}
