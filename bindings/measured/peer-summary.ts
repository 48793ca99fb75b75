// The peer simulator's prediction of a measured run (llmservingsim-summary.txt,
// docs/validation.md): a table of TTFT, TPOT and end-to-end latency, each at
// its mean, median, p90, p95 and p99, measured ("vLLM") against simulated
// ("Sim"), in ms. Read so that a comparison can show the peer's figure beside
// kvpool's; every line that names a figure must be whole.

import { describe } from '../validate.js';

/** Mean and percentiles, ms. */
export interface FigureSummary {
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
}

/** The figures a run is compared on (ITL apart: no run of the format records it). */
export interface RunFigures {
  ttftMs: FigureSummary;
  tpotMs: FigureSummary;
  e2eMs: FigureSummary;
}

export interface PeerSummary {
  /** Who predicted: "LLMServingSim". */
  simulator: string;
  /** The peer's copy of the measured figures. */
  measured: RunFigures;
  /** The peer's prediction. */
  predicted: RunFigures;
  /** Its error as the peer computed it (from figures it printed rounded), %. */
  differencePct: RunFigures;
}

const METRICS: Record<string, keyof RunFigures> = { TTFT: 'ttftMs', TPOT: 'tpotMs', Latency: 'e2eMs' };
const STATS: Record<string, keyof FigureSummary> = { Mean: 'mean', Median: 'p50', P90: 'p90', P95: 'p95', P99: 'p99' };

/** Parses the summary's table: every figure of every metric must be there, once. */
export function parsePeerSummary(where: string, text: string): PeerSummary {
  if (typeof text !== 'string') throw new TypeError(`${where}: must be the file's text, got ${describe(text)}`);
  const got = { measured: {} as Record<string, Record<string, number>>, predicted: {} as Record<string, Record<string, number>>, diff: {} as Record<string, Record<string, number>> };
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const words = lines[i]!.trim().split(/\s+/);
    const metric = METRICS[words[0] ?? ''];
    if (metric === undefined) continue; // the header, rules, blank lines
    const at = `${where} line ${i + 1}`;
    const stat = STATS[words[1] ?? ''];
    if (stat === undefined) throw new RangeError(`${at}: "${words[1] ?? ''}" is not one of ${Object.keys(STATS).join(', ')}`);
    const nums = words.slice(2, 4).map(Number);
    const diff = /^[+-]?\d+(\.\d+)?%$/.test(words[4] ?? '') ? Number(words[4]!.slice(0, -1)) : NaN;
    if (words.length !== 5 || nums.some((x) => !Number.isFinite(x) || x < 0) || !Number.isFinite(diff)) throw new RangeError(`${at}: ${words[0]} ${words[1]} needs the measured and the simulated figure in ms and the difference in %, got ${JSON.stringify(lines[i]!.trim())}`);
    const m = (got.measured[metric] ??= {});
    if (m[stat] !== undefined) throw new RangeError(`${at}: ${words[0]} ${words[1]} is given twice`);
    m[stat] = nums[0]!;
    (got.predicted[metric] ??= {})[stat] = nums[1]!;
    (got.diff[metric] ??= {})[stat] = diff === 0 ? 0 : diff; // "-0.0%" is 0
  }
  for (const [name, metric] of Object.entries(METRICS)) {
    for (const [label, stat] of Object.entries(STATS)) {
      if (got.measured[metric]?.[stat] === undefined) throw new RangeError(`${where}: no "${name} ${label}" line`);
    }
  }
  return { simulator: 'LLMServingSim', measured: got.measured as unknown as RunFigures, predicted: got.predicted as unknown as RunFigures, differencePct: got.diff as unknown as RunFigures };
}
