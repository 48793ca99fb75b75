// A replay target that forwards to another one, less some of its optional
// members: the loop then takes the path it takes without them, so a test
// can compare the two paths on the same pool code.

import type { Sequence } from '../../bindings/pool/sequence.js';
import type { ReplayTarget } from '../../bindings/replay/kernel.js';

type Optional = Exclude<keyof ReplayTarget<Sequence>, 'newSequence' | 'allocate' | 'cache' | 'deallocate' | 'blocksEvicted' | 'numFreeBlocks' | 'numBlocksInPrefixCache'>;

/** `t` without the optional members named in `drop` (methods bound to `t`). */
export function targetWithout(t: ReplayTarget<Sequence>, drop: readonly Optional[]): ReplayTarget<Sequence> {
  const out: Record<string, unknown> = {};
  const all: Array<keyof ReplayTarget<Sequence>> = [
    'newSequence', 'allocate', 'cache', 'deallocate', 'blocksEvicted', 'numFreeBlocks', 'numBlocksInPrefixCache',
    'prefilled', 'extraResult', 'recycle', 'decodeRoom', 'decodeSteps', 'appendOutputs', 'blockIds', 'holdsPrompt', 'keepsPrompt', 'advanceOutputs',
  ];
  for (const k of all) {
    if ((drop as readonly string[]).includes(k)) continue;
    const v = t[k] as unknown;
    if (v === undefined) continue;
    out[k] = typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
  }
  return out as unknown as ReplayTarget<Sequence>;
}
