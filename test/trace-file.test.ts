// Reading traces: plain and gzipped files, standard input, built-in names,
// byte-order marks and CRLF, and bad input named by its line number.

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { BUILTIN_TRACES, readTraceFile, resolveTrace } from '../bindings/node/trace-file.js';
import { parseTrace, TraceError, type TraceRequest } from '../bindings/replay/trace.js';

const dir = mkdtempSync(join(tmpdir(), 'kvpool-trace-'));
const LINES = [
  '{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [3, 4]}',
  '',
  '{"timestamp": 5, "input_length": 10, "output_length": 0, "hash_ids": [3]}',
  '{"timestamp": 9, "input_length": 1025, "output_length": 7, "hash_ids": [3, 8, 9]}',
];
const TEXT = LINES.join('\n') + '\n';

function file(name: string, data: string | Uint8Array): string {
  const f = join(dir, name);
  writeFileSync(f, data);
  return f;
}

const plain = (rs: TraceRequest[]) => rs.map((r) => ({ ...r, hashIds: [...r.hashIds] }));
const expected = plain(parseTrace(TEXT));

describe('readTraceFile', () => {
  it('reads plain and gzipped files alike (told by content, not name)', async () => {
    expect(expected.map((r) => r.inputLength)).toEqual([600, 10, 1025]);
    expect(plain(await readTraceFile(file('a.jsonl', TEXT)))).toEqual(expected);
    expect(plain(await readTraceFile(file('a.jsonl.gz', gzipSync(TEXT))))).toEqual(expected);
    expect(plain(await readTraceFile(file('gz-without-suffix', gzipSync(TEXT))))).toEqual(expected);
  });

  it('reads "-" from standard input, in chunks that split lines anywhere', async () => {
    const bytes = Buffer.from(TEXT);
    const chunks = [bytes.subarray(0, 7), bytes.subarray(7, 90), bytes.subarray(90)];
    expect(plain(await readTraceFile('-', { stdin: Readable.from(chunks) }))).toEqual(expected);
    const gz = gzipSync(TEXT);
    expect(plain(await readTraceFile('-', { stdin: Readable.from([gz.subarray(0, 5), gz.subarray(5)]) }))).toEqual(expected);
  });

  it('skips a UTF-8 byte-order mark, takes CRLF line ends and a last line without newline', async () => {
    const crlf = '\uFEFF' + LINES.join('\r\n');
    expect(plain(await readTraceFile(file('bom.jsonl', crlf)))).toEqual(expected);
    expect(plain(parseTrace(crlf))).toEqual(expected);
  });

  it('stops after `limit` requests', async () => {
    const f = file('l.jsonl', TEXT);
    expect((await readTraceFile(f, 2)).map((r) => r.inputLength)).toEqual([600, 10]);
    expect((await readTraceFile(f, { limit: 0 })).length).toBe(0);
    expect((await readTraceFile(f, Infinity)).length).toBe(3); // all: the blank line is no request
    expect((await readTraceFile(f, { limit: Infinity })).length).toBe(3);
  });

  it('checks its limit and options by name before reading', async () => {
    const f = file('o.jsonl', TEXT);
    await expect(readTraceFile(f, 1.5)).rejects.toThrow(new RangeError('limit must be an integer, got 1.5'));
    await expect(readTraceFile(f, { limit: '3' as never })).rejects.toThrow(new TypeError('options.limit must be a number, got "3"'));
    await expect(readTraceFile(f, { limit: -1 })).rejects.toThrow(/^options.limit must be in \[0, 9007199254740991\], got -1/);
    await expect(readTraceFile(f, { maxLineBytes: 0 })).rejects.toThrow(/^options.maxLineBytes must be in \[1, 9007199254740991\], got 0/);
    await expect(readTraceFile(f, { bogus: 1 } as never)).rejects.toThrow(/^options: unknown option "bogus" \(known: limit, stdin, maxLineBytes\)/);
    await expect(readTraceFile(f, null as never)).rejects.toThrow(/^options must be an object, got null/);
    await expect(readTraceFile(f, { stdin: 5 } as never)).rejects.toThrow(new TypeError('options.stdin must be a readable stream, got 5'));
  });

  it('checks a timestamp when there is one (a fleet counts its steps from it)', async () => {
    for (const [ts, shown] of [['"x"', '"x"'], ['-5', '-5'], ['1e400', 'Infinity'], ['1e300', '1e+300'], ['null', 'null']]) {
      const bad = `{"timestamp": ${ts}, "input_length": 10, "output_length": 0, "hash_ids": [3]}`;
      await expect(readTraceFile(file('ts.jsonl', LINES[0] + '\n' + bad + '\n'))).rejects.toThrow(
        new TraceError(2, `"timestamp" must be a number of milliseconds in [0, 2^53 - 1] (or absent), got ${shown}`),
      );
    }
    const none = parseTrace('{"input_length": 10, "output_length": 0, "hash_ids": [3]}');
    expect(none[0]!.timestamp).toBeUndefined();
  });

  it('names the line of a malformed request, also inside a gzip file', async () => {
    const bad = LINES.slice(0, 3).join('\n') + '\n{"input_length": "x"}\n';
    await expect(readTraceFile(file('bad.jsonl', bad))).rejects.toThrow(/trace line 4: "input_length" must be a non-negative integer, got "x"/);
    await expect(readTraceFile(file('bad.jsonl.gz', gzipSync(bad)))).rejects.toThrow(/trace line 4: /);
  });

  it('rejects an overlong line with its number instead of running out of memory', async () => {
    const f = file('long.jsonl', LINES[0] + '\n' + 'x'.repeat(5000) + '\n');
    await expect(readTraceFile(f, { maxLineBytes: 4096 })).rejects.toThrow(/trace line 2: longer than 4096 bytes/);
    expect((await readTraceFile(f, { maxLineBytes: 4096, limit: 1 })).length).toBe(1);
  });

  it('says what is wrong with a missing file or a broken gzip stream', async () => {
    await expect(readTraceFile(join(dir, 'nope.jsonl'))).rejects.toThrow(/cannot read trace ".*nope.jsonl": no such file \(built-in traces: mooncake-conversation\)/);
    const broken = gzipSync(TEXT).subarray(0, 40);
    await expect(readTraceFile(file('broken.gz', broken))).rejects.toThrow(/cannot read trace ".*broken.gz": /);
  });
});

describe('the built-in Mooncake conversation trace', () => {
  it('is the published file, byte for byte (traces/README.md)', () => {
    const text = gunzipSync(readFileSync(BUILTIN_TRACES['mooncake-conversation']!.file));
    expect(text.length).toBe(3_029_533);
    expect(createHash('sha256').update(text).digest('hex')).toBe('b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df');
  });

  it('is read by name, every one of its 12,031 requests', async () => {
    expect(resolveTrace('mooncake-conversation')).toEqual({ path: BUILTIN_TRACES['mooncake-conversation']!.file });
    const all = await readTraceFile('mooncake-conversation');
    expect(all.length).toBe(12_031);
    const text = gunzipSync(readFileSync(BUILTIN_TRACES['mooncake-conversation']!.file)).toString('utf8');
    expect(plain(all.slice(0, 50))).toEqual(plain(parseTrace(text.split('\n').slice(0, 50).join('\n'))));
    expect(all.reduce((a, r) => a + r.inputLength, 0)).toBe(plain(parseTrace(text)).reduce((a, r) => a + r.inputLength, 0));
  });
});
