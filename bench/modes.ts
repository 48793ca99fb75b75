// npm run bench, the modes part: every replay mode against the plain replay
// of the same trace, in this one process, the modes taking turns round after
// round so that a slow phase of the shared machine hits all of them alike.
// Ratios are what to read: each round's own ratio to that round's plain
// replay, and the median of those.

import type { TraceRequest } from '../bindings/replay/trace.js';
import { replaySync } from '../bindings/replay/replay.js';
import { progress } from './progress.js';
import { REPLAY_MODES } from './replay-modes.js';

/** The modes the table compares (the plain replay first: every ratio is to it). */
export const MODES_AGAINST_PLAIN = ['plain', 'sliding-window', 'lfu', 'priority', 'host-tier', 'linear-state'] as const;

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Prints the table: a round to warm up (left out), then `rounds` rounds of every mode. */
export function modesAgainstPlain(trace: readonly TraceRequest[], rounds: number): void {
  const wall = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  const bar = progress('every mode against plain', (rounds + 1) * MODES_AGAINST_PLAIN.length);
  let done = 0;
  for (let r = 0; r <= rounds; r++) {
    for (const mode of MODES_AGAINST_PLAIN) {
      bar.update(done++, r === 0 ? `warm-up, ${mode}` : `round ${r}/${rounds}, ${mode}`);
      const c0 = process.cpuUsage();
      const res = replaySync({ ...REPLAY_MODES[mode]!, trace: trace as TraceRequest[] });
      const c = process.cpuUsage(c0);
      if (r === 0) continue;
      wall.set(mode, [...(wall.get(mode) ?? []), res.seconds]);
      cpu.set(mode, [...(cpu.get(mode) ?? []), (c.user + c.system) / 1e6]);
    }
  }
  bar.update(done);
  bar.stop();
  const ownRatios = (data: Map<string, number[]>, mode: string) => data.get(mode)!.map((x, i) => x / data.get('plain')![i]!);
  console.log(`\nEvery mode against the plain replay (${trace.length} requests; median of ${rounds} rounds in this process, after one to warm up)`);
  console.log('| mode | loop seconds | vs plain | vs plain, per round | CPU seconds | vs plain, CPU |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const mode of MODES_AGAINST_PLAIN) {
    const w = median(wall.get(mode)!);
    const c = median(cpu.get(mode)!);
    console.log(
      `| ${mode} | ${w.toFixed(3)} | ${(w / median(wall.get('plain')!)).toFixed(2)}x | ${median(ownRatios(wall, mode)).toFixed(2)}x | ${c.toFixed(3)} | ${(c / median(cpu.get('plain')!)).toFixed(2)}x |`,
    );
  }
}
