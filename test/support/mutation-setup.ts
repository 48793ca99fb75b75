// Mutation runs only (vitest.mutation.config.ts): one fast-check seed, so that
// a mutant's fate does not depend on the random draws of the run it was in.
import fc from 'fast-check';

fc.configureGlobal({ seed: Number(process.env['KVPOOL_FC_SEED'] ?? 20261202) });
