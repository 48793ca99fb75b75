// The SLO answer in words, as `kvpool fleet`, fleet sweeps and the sweep
// report give it: per router (in a sweep, per router and panel), the fewest
// engines whose p99 TTFT, TPOT and ITL meet the targets, with the figures
// that decided it. Here, below node/ and cli/, so both say it the same way.

import type { FleetRun } from './fleet-result.js';
import { compareFleetSize, fewestMeeting, SLO_TARGETS, unserved, type SloTargets } from './slo-search.js';
import { fixed } from '../number-text.js';

/** How each target is named in words. */
const SLO_NAMES: Record<(typeof SLO_TARGETS)[number], string> = { ttftMs: 'TTFT', tpotMs: 'TPOT', itlMs: 'ITL' };

/** Milliseconds (and per-second rates) for people: one decimal, thousands separated. */
export function ms(x: number): string {
  return fixed(x, 1);
}

/** What one group of runs (a router's, in a sweep also a panel's) answers. */
export interface SloAnswer {
  /** "round-robin", or "round-robin, num-blocks 600" in a sweep with more axes. */
  label: string;
  /** The fewest engines meeting every target; null: no run did. */
  engines: number | null;
  /** The run that met them, or (none did) the one with the most engines. */
  run: FleetRun;
  /** The most engines tried. */
  maxEngines: number;
  /** When none met the targets and the reason is knowable (slo-floor.ts: no fleet can), the reason. */
  why?: string;
  /** Engine counts not run because `why` showed, before any run, that none can meet the targets (sloSearch). */
  skipped?: number;
}

/** The answer of a group of runs (timed, at least one). */
export function sloAnswer(label: string, runs: readonly FleetRun[], slo: SloTargets): SloAnswer {
  const best = fewestMeeting(runs, slo);
  const largest = runs.reduce((a, b) => (b.config.engines > a.config.engines ? b : a));
  return { label, engines: best === null ? null : best.config.engines, run: best ?? largest, maxEngines: largest.config.engines };
}

/** The targets given, in order. */
const given = (slo: SloTargets) => SLO_TARGETS.filter((k) => slo[k] !== undefined);

/** "p99 TTFT <= 500 ms and p99 ITL <= 50 ms". */
export function sloText(slo: SloTargets): string {
  return given(slo).map((k) => `p99 ${SLO_NAMES[k]} <= ${slo[k]} ms`).join(' and ');
}

/** "p99 TTFT 431.2 ms, p99 ITL 42.0 ms": the run's figures for the targets given. */
function figuresText(r: FleetRun, slo: SloTargets): string {
  const l = r.latency!;
  const lost = Object.entries(unserved(r)).filter(([, v]) => v > 0).map(([k, v]) => `${v.toLocaleString('en-US')} ${k === 'finishedEarly' ? 'finished early' : k}`);
  return [...given(slo).map((k) => `p99 ${SLO_NAMES[k]} ${ms(l[k].p99)} ms`), ...lost].join(', ');
}

/** "; so only the 32-engine fleet ran, not the 31 smaller ones" when the floor made the search skip counts. */
function skippedText(a: SloAnswer): string {
  const n = a.skipped ?? 0;
  return n === 0 ? '' : `; so only the ${a.maxEngines}-engine fleet ran, not the ${n.toLocaleString('en-US')} smaller one${n === 1 ? '' : 's'}`;
}

/** The answer as a sentence, prefixed with its label when there are several. */
export function sloAnswerLine(a: SloAnswer, slo: SloTargets, labelled: boolean): string {
  const head = labelled ? `${a.label}: ` : '';
  return a.engines === null
    ? `${head}no fleet up to ${a.maxEngines} engines meets ${sloText(slo)} (${a.maxEngines} engines: ${figuresText(a.run, slo)})${a.why === undefined ? '' : `; ${a.why}`}${skippedText(a)}`
    : `${head}fewest engines meeting ${sloText(slo)}: ${a.engines} (${figuresText(a.run, slo)})`;
}

/** The `slo` object of JSON output: the targets, and per group the answer with the p99 figures of its run. */
export function sloJson(slo: SloTargets, answers: readonly SloAnswer[]): unknown {
  return {
    ...slo,
    percentile: 99,
    answers: answers.map((a) => ({
      label: a.label,
      router: a.run.config.router,
      engines: a.engines,
      maxEngines: a.maxEngines,
      ttftMsP99: a.run.latency!.ttftMs.p99,
      tpotMsP99: a.run.latency!.tpotMs.p99,
      itlMsP99: a.run.latency!.itlMs.p99,
      ...(a.why !== undefined && { why: a.why }),
      ...(a.skipped !== undefined && a.skipped > 0 && { skipped: a.skipped }),
    })),
  };
}

/** What a sweep answers for one group of its fleets (a router's, per value of the other axes but engines and blocks). */
export interface SweepSloAnswer {
  /** "round-robin", or "round-robin, speedup 2" when other axes vary. */
  label: string;
  /** The smallest fleet meeting every target (fewest engines, then fewest blocks per rank); null: none of the group. */
  met: FleetRun | null;
  /** The group's largest fleet (most engines, then most blocks): what came closest when none met. */
  largest: FleetRun;
  /** When none met the targets and the reason is knowable (slo-floor.ts: no fleet can), the reason. */
  why?: string;
}

/** The sweep's answers, a group per distinct label (in order of first appearance); every run timed. */
export function sweepSloAnswers(runs: readonly FleetRun[], slo: SloTargets, label: (r: FleetRun) => string): SweepSloAnswer[] {
  const groups = new Map<string, FleetRun[]>();
  for (const r of runs) {
    const key = label(r);
    const g = groups.get(key);
    if (g === undefined) groups.set(key, [r]);
    else g.push(r);
  }
  return [...groups].map(([key, g]) => ({ label: key, met: fewestMeeting(g, slo), largest: g.reduce((a, b) => (compareFleetSize(b, a) > 0 ? b : a)) }));
}

const fleetSize = (r: FleetRun) => `${r.config.engines} engine${r.config.engines === 1 ? '' : 's'} x ${r.config.numBlocks.toLocaleString('en-US')} blocks`;

/** "round-robin: smallest fleet meeting p99 TTFT <= 500 ms: 4 engines x 4,096 blocks (p99 TTFT 431.2 ms)". */
export function sweepSloLine(a: SweepSloAnswer, slo: SloTargets): string {
  return a.met === null
    ? `${a.label}: no fleet tried meets ${sloText(slo)} (the largest, ${fleetSize(a.largest)}: ${figuresText(a.largest, slo)})${a.why === undefined ? '' : `; ${a.why}`}`
    : `${a.label}: smallest fleet meeting ${sloText(slo)}: ${fleetSize(a.met)} (${figuresText(a.met, slo)})`;
}

/** The `slo` object of a sweep's JSON: the targets, and per group the smallest fleet meeting them (null: none). */
export function sweepSloJson(slo: SloTargets, answers: readonly SweepSloAnswer[]): unknown {
  return {
    ...slo,
    percentile: 99,
    answers: answers.map((a) => ({
      label: a.label,
      router: a.largest.config.router,
      engines: a.met?.config.engines ?? null,
      numBlocks: a.met?.config.numBlocks ?? null,
      ttftMsP99: a.met?.latency!.ttftMs.p99 ?? null,
      tpotMsP99: a.met?.latency!.tpotMs.p99 ?? null,
      itlMsP99: a.met?.latency!.itlMs.p99 ?? null,
      ...(a.why !== undefined && { why: a.why }),
    })),
  };
}
