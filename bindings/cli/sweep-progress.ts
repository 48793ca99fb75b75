// The sweep's progress bar on stderr (only when it is a terminal): every
// configuration's requests in one bar, with runs done and an ETA.

import cliProgress from 'cli-progress';
import type { SweepProgress } from '../node/sweep.js';

export function sweepProgressBar(enabled: boolean, totalRuns: number, what = 'runs'): { onProgress: ((p: SweepProgress) => void) | undefined; stop: () => void } {
  const bar =
    enabled && process.stderr.isTTY
      ? new cliProgress.SingleBar(
          {
            format: `sweep [{bar}] {percentage}% | {runs}/{totalRuns} ${what} | {value}/{total} requests | {duration_formatted} | ETA {eta_formatted}`,
            stream: process.stderr,
            etaBuffer: 50,
          },
          cliProgress.Presets.shades_classic,
        )
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
