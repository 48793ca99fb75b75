// Plain-language warnings about a replay result that is probably not what
// its user meant: figures of nothing, or of a pool too small to run anything.

import type { ReplayResult } from './kernel.js';

interface Checked extends Pick<ReplayResult, 'requests' | 'rejected' | 'truncated'> {
  config: { numBlocks: number; blockSize: number; dpSize: number; limit: number | null };
}

export function replayWarnings(r: Checked): string[] {
  const out: string[] = [];
  const c = r.config;
  const pool = `${c.dpSize > 1 ? `${c.dpSize} ranks of ` : ''}${c.numBlocks} blocks of ${c.blockSize} tokens`;
  if (r.requests === 0) {
    out.push(c.limit === 0 ? 'nothing was replayed: the limit is 0' : 'nothing was replayed: the trace has no requests');
  } else if (r.rejected === r.requests) {
    out.push(`every request was rejected: no prompt fits in a pool of ${pool} (raise the number of blocks)`);
  } else if (r.rejected > 0) {
    out.push(`${r.rejected} of ${r.requests} requests were rejected: their prompt needs more blocks than a rank of ${pool} has`);
  }
  if (r.truncated > 0) {
    out.push(`${r.truncated} requests stopped decoding early for lack of blocks (counted as truncated)`);
  }
  return out;
}
