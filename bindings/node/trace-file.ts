// Node-only: streams a JSONL trace file line by line into compact requests
// (the 12,031-request conversation trace needs a few MB this way).

import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseTraceLine, type TraceRequest } from '../replay/trace.js';

export async function readTraceFile(path: string, limit = Infinity): Promise<TraceRequest[]> {
  const out: TraceRequest[] = [];
  const stream = createReadStream(path, { encoding: 'utf8' });
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  let line = 0;
  try {
    for await (const text of lines) {
      line++;
      const r = parseTraceLine(text, line);
      if (r) out.push(r);
      if (out.length >= limit) break;
    }
  } finally {
    lines.close();
    stream.destroy();
  }
  return out;
}
