// How long an engine step takes, from what the step computes (docs/timing.md):
// a timing model maps a step's batch (every prefill chunk with its history,
// every decode with its context, host loads) to milliseconds. Three kinds
// ship: a polynomial with documented, illustrative coefficients; a table
// interpolated from measured step times; and a profile of per-layer kernel
// times measured on a GPU, composed as a forward pass runs them.

import { checkKeys, checkObject, describe } from '../validate.js';
import { Polynomial, parsePolynomial, POLYNOMIAL_KEYS, type PolynomialTiming } from './polynomial.js';
import { checkProfileSpec, profileModel, type ProfileTiming } from './profile-spec.js';
import { parseTable, Table, TABLE_KEYS, type ParsedTable, type TableTiming } from './table-model.js';
import type { TimingModel } from './step-batch.js';

export { emptyStepBatch, clearStepBatch, addChunk, addDecode, checkBatch, checkRanks, type StepBatch, type TimingModel, type KvFacts } from './step-batch.js';
export { DEFAULT_TIMING, type PolynomialTiming } from './polynomial.js';
export type { TableTiming } from './table-model.js';
export type { ProfileTiming } from './profile-spec.js';

export type TimingSpec = PolynomialTiming | TableTiming | ProfileTiming;

/** What `timingModel` takes: a spec whose polynomial coefficients left out keep their defaults. */
export type TimingSpecInput = TableTiming | ProfileTiming | ({ kind: 'polynomial' } & Partial<Omit<PolynomialTiming, 'kind'>>);

/**
 * Checks a spec (every field named in a refusal) and returns it complete; a
 * profile's bundle is not read here (timingModel reads it).
 */
export function parseTimingSpec(spec: unknown, name = 'timing'): TimingSpec {
  checkObject(name, spec);
  const o = spec as Record<string, unknown>;
  if (o['kind'] === 'polynomial') {
    checkKeys(name, o, POLYNOMIAL_KEYS);
    return parsePolynomial(o, name);
  }
  if (o['kind'] === 'table') {
    checkKeys(name, o, TABLE_KEYS);
    return parseTable(o, name);
  }
  if (o['kind'] === 'profile') {
    checkProfileSpec(o, name);
    return { ...o } as unknown as ProfileTiming;
  }
  throw new RangeError(`${name}.kind must be "polynomial", "table" or "profile", got ${describe(o['kind'])}`);
}

/**
 * The model a spec describes (none, or true as `fleet()`'s `timing: true`:
 * the default polynomial); a TimingModel of your own is used as it is.
 */
export function timingModel(spec?: true | TimingSpecInput | TimingModel): TimingModel {
  if (spec === undefined || spec === true) return new Polynomial(parsePolynomial({}, 'timing'));
  if (spec !== null && typeof spec === 'object' && typeof (spec as TimingModel).stepMs === 'function') {
    if (typeof (spec as TimingModel).name !== 'string') throw new TypeError(`timing: a TimingModel needs a string name, got ${describe((spec as TimingModel).name)}`);
    return spec as TimingModel;
  }
  const p = parseTimingSpec(spec);
  if (p.kind === 'polynomial') return new Polynomial(p);
  if (p.kind === 'table') return new Table(p as ParsedTable);
  return profileModel(p);
}
