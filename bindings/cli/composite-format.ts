// CLI pieces of the composite replay: the --compress-ratios parser and the
// per-sub-manager rows of the result table.

import { InvalidArgumentError } from 'commander';
import type { CompositeReplayResult } from '../replay/composite-replay.js';
import type { ReplayResult } from '../replay/kernel.js';

/** Parses "1,4,128" into ratios >= 1. */
export function ratiosOption(name: string) {
  return (value: string): number[] => {
    const parts = value.split(',').map((x) => x.trim());
    return parts.map((x) => {
      const n = Number(x);
      if (!/^\d+$/.test(x) || !Number.isSafeInteger(n) || n < 1) {
        throw new InvalidArgumentError(`${name} must be a comma-separated list of integers >= 1, got ${JSON.stringify(value)}`);
      }
      return n;
    });
  };
}

/** One table row per sub-manager of a composite replay (none otherwise). */
export function formatSubManagers(r: ReplayResult | CompositeReplayResult): string[] {
  if (!('subManagers' in r)) return [];
  const head = ['sub-manager', 'kind', 'block size', 'blocks', 'peak used', 'allocated', 'released'];
  const rows = r.subManagers.map((s, i) => [
    String(i),
    s.kind,
    String(s.blockSize),
    String(s.numBlocks),
    String(s.peakUsedBlocks),
    String(s.allocatedBlocks),
    String(s.releasedBlocks),
  ]);
  const w = head.map((h, c) => Math.max(h.length, ...rows.map((row) => row[c]!.length)));
  const line = (cells: string[]) => '  ' + cells.map((x, c) => (c < 2 ? x.padEnd(w[c]!) : x.padStart(w[c]!))).join('  ');
  return ['', line(head), ...rows.map(line)];
}
