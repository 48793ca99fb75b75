// What `npm run bench` is doing while it runs, on stderr (the tables go to
// stdout): a line per phase with its expected length, then a progress bar on
// a terminal or a line per step elsewhere (CI logs).

import cliProgress from 'cli-progress';

const tty = process.stderr.isTTY === true;
const t0 = performance.now();
const since = () => `${((performance.now() - t0) / 1000).toFixed(0)}s`;

/** Announces a phase: "[bench 12s] replay, model (takes ~2 min)". */
export function phase(what: string, expect?: string): void {
  process.stderr.write(`[bench ${since()}] ${what}${expect ? ` (${expect})` : ''}\n`);
}

/** A progress reporter for `total` steps: a bar on a terminal, else a line every ~10 %. */
export function progress(what: string, total: number): { update(done: number, label?: string): void; stop(): void } {
  if (tty) {
    const bar = new cliProgress.SingleBar(
      { format: `  ${what} [{bar}] {value}/{total} {label} | {duration_formatted} | ETA {eta_formatted}`, stream: process.stderr, etaBuffer: 40 },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, 0, { label: '' });
    return { update: (d, label = '') => bar.update(d, { label }), stop: () => bar.stop() };
  }
  let next = 0;
  return {
    update: (d, label) => {
      if (d < next && d < total) return;
      next = d + Math.max(1, Math.ceil(total / 10));
      process.stderr.write(`  [${since()}] ${what}: ${d}/${total}${label ? ` ${label}` : ''}\n`);
    },
    stop: () => {},
  };
}
