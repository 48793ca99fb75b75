// The sweep's progress bar on stderr (only when it is a terminal): every
// configuration's requests in one bar, with runs done and an ETA, within
// 80 columns.

import { progressBar } from './progress-bar.js';
import type { SweepProgress } from '../node/sweep.js';

export function sweepProgressBar(enabled: boolean, totalRuns: number, what = 'runs'): { onProgress: ((p: SweepProgress) => void) | undefined; stop: () => void } {
  const bar =
    enabled && process.stderr.isTTY
      ? progressBar(`sweep [{bar}] {percentage}% | {runs}/{totalRuns} ${what} | {duration_formatted} | ETA {eta_formatted}`, { etaBuffer: 50, barsize: 20 })
      : null;
  let started = false;
  return {
    onProgress: bar
      ? (p) => {
          if (!started) {
            bar.start(p.requestsTotal, 0, { runs: 0, totalRuns });
            started = true;
          }
          bar.update(p.requestsDone, { runs: p.runsDone });
        }
      : undefined,
    stop: () => bar?.stop(),
  };
}
