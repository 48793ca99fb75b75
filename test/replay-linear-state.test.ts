// `kvpool replay --linear-state-slots N`: the replay loop with linear-state checkpoints.

import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { replaySync, type ReplayRun } from '../bindings/replay/replay.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { capture } from './support/capture.js';

/** The run, which must be a linear-state one (the result type says which parts it has). */
function linear(r: ReplayRun) {
  if (r.mode !== 'linear-state') throw new Error(`expected a linear-state run, got mode ${r.mode}`);
  return r;
}

describe('replay with linear state', () => {
  const trace = generateWorkload({ requests: 150, seed: 3 });

  it('without KV eviction or slot pressure, trimming only moves matched blocks to trimmed ones', () => {
    const plain = replaySync({ trace, numBlocks: 65536 });
    const ls = linear(replaySync({ trace, numBlocks: 65536, linearStateSlots: 1 << 16 }));
    expect(plain.mode).toBe('plain');
    expect('linearState' in plain).toBe(false);
    const l = ls.linearState;
    expect(plain.evictedBlocks).toBe(0);
    expect(ls.evictedBlocks).toBe(0);
    expect(l.checkpointEvictions).toBe(0);
    // The KV prefix cache holds the same keys either way, so every hit the
    // plain replay used is either used here or trimmed for lack of a checkpoint.
    expect(ls.matchedBlocks + l.trimmedBlocks).toBe(plain.matchedBlocks);
    expect(ls.matchedBlocks).toBeGreaterThan(0);
    // Prompts only ever match earlier prompts' blocks (answers are new tokens),
    // and every prompt boundary was checkpointed and kept: nothing is trimmed.
    expect(l.trimmedBlocks).toBe(0);
    expect(l.checkpointHits).toBeGreaterThan(0);
    // Every prompt boundary is saved once: saved checkpoints are the distinct prompt-prefix boundaries.
    expect(l.checkpointsSaved).toBeLessThanOrEqual(ls.promptBlocks - ls.matchedBlocks);
    expect(ls.requests).toBe(150);
  });

  it('few slots: checkpoints are evicted and fewer blocks are reused; the run is deterministic', () => {
    const a = linear(replaySync({ trace, numBlocks: 65536, linearStateSlots: 40 }));
    const b = linear(replaySync({ trace, numBlocks: 65536, linearStateSlots: 40 }));
    const big = replaySync({ trace, numBlocks: 65536, linearStateSlots: 1 << 16 });
    expect(a.linearState.checkpointEvictions).toBeGreaterThan(0);
    expect(a.matchedBlocks).toBeLessThan(big.matchedBlocks);
    expect(a.matchedBlocks + a.linearState.trimmedBlocks).toBe(big.matchedBlocks);
    const strip = ({ seconds: _s, allocateCallsPerSecond: _c, ...r }: typeof a) => r;
    expect(strip(a)).toEqual(strip(b));
  });

  it('the CLI prints the linear-state rows and validates the flag', async () => {
    const ok = await capture(() => main(['replay', '--requests', '30', '--linear-state-slots', '64', '--json']));
    expect(ok.code).toBe(0);
    const r = JSON.parse(ok.out);
    expect(Object.keys(r.linearState)).toEqual(['checkpointHits', 'checkpointsSaved', 'checkpointEvictions', 'trimmedBlocks']);
    const bad = await capture(() => main(['replay', '--linear-state-slots', '1']));
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/--linear-state-slots must be >= 2, got 1/);
  });
});
