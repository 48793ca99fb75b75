// A Stryker checker that lets a fixed random sample of the mutants through
// to the tests and marks the rest "not in the sample" (Stryker reports them
// as compile errors, which count in no score). A full run of
// bindings/ranks and the XTensor managers takes most of a day on this
// machine's two cores; a uniform sample estimates their score in an hour
// (docs/mutation-testing.md, "Sampled runs").
//
// KVPOOL_MUTATION_SAMPLE=<fraction>[:<seed>], e.g. 0.1 or 0.1:7. A mutant is
// in the sample when the hash of its file, position, mutator and
// replacement, with the seed, falls below the fraction: the same mutants on
// every run and machine, independent of which files are run together.

import { createHash } from 'node:crypto';
import { PluginKind, declareClassPlugin } from '@stryker-mutator/api/plugin';

/** The fraction and seed of KVPOOL_MUTATION_SAMPLE; throws on a malformed value. */
export function sampleSpec(value = process.env.KVPOOL_MUTATION_SAMPLE) {
  const m = /^(0(?:\.\d+)?|1(?:\.0+)?)(?::(\d+))?$/.exec(value ?? '');
  if (m === null) throw new Error(`KVPOOL_MUTATION_SAMPLE must be "<fraction in [0, 1]>[:<seed>]", got ${JSON.stringify(value)}`);
  return { fraction: Number(m[1]), seed: m[2] ?? '0' };
}

/**
 * Whether a mutant is in the sample. `fileName` may be absolute or relative
 * (Stryker gives sandbox paths): only the part from `bindings/` on is hashed.
 */
export function inSample(mutant, { fraction, seed }) {
  const file = mutant.fileName.replace(/\\/g, '/').replace(/^.*?(?=bindings\/)/, '');
  const { start, end } = mutant.location;
  const key = `${seed}|${file}|${start.line}:${start.column}-${end.line}:${end.column}|${mutant.mutatorName}|${mutant.replacement}`;
  return createHash('sha256').update(key).digest().readUInt32BE(0) / 2 ** 32 < fraction;
}

class SampleChecker {
  spec = sampleSpec();

  async init() {}

  async check(mutants) {
    const out = {};
    for (const m of mutants) out[m.id] = inSample(m, this.spec) ? { status: 'passed' } : { status: 'compileError', reason: 'not in the sample' };
    return out;
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.Checker, 'sample', SampleChecker)];
