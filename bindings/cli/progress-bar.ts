// The progress bars' common settings (cli-progress). A bar never turns the
// terminal's line wrapping off (cli-progress does by default, with
// ESC[?7l, and restores it only when stopped: a process ended by Ctrl-C
// left the terminal without wrapping); it trims its line to the terminal's
// width instead. A time it cannot estimate yet is "--", not "NFs" (its
// formatter's rendering of an infinite ETA).

import cliProgress from 'cli-progress';

/** Seconds as the bar shows them; '--' for an estimate it does not have (Infinity, NaN, cli-progress's 'INF' and 'NULL'). */
function time(t: unknown, options: cliProgress.Options, roundTo: number): string {
  return typeof t === 'number' && Number.isFinite(t) ? cliProgress.Format.TimeFormat(t, options, roundTo) : '--';
}

/** A bar on stderr with `format`. */
export function progressBar(format: string, extra: cliProgress.Options = {}): cliProgress.SingleBar {
  return new cliProgress.SingleBar({ format, stream: process.stderr, linewrap: true, formatTime: time, ...extra }, cliProgress.Presets.shades_classic);
}
