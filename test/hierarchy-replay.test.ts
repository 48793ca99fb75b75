// The replay kernel with a host tier (`kvpool replay --host-blocks N`):
// host figures agree with the reference model, the device side is exactly
// the replay without a host tier (transfers complete at once), and the
// default result is unchanged.

import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { type ReplayResult } from '../bindings/replay/kernel.js';
import { runReplay } from '../bindings/replay/stepper.js';
import { replaySync } from '../bindings/replay/replay.js';
import type { HostTierReplayRun } from '../bindings/replay/replay.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { ModelHierarchyPool } from '../model/hierarchy-block-manager-pool.js';
import { ModelHierarchyReplayTarget } from './support/model-hierarchy-replay-target.js';
import { capture } from './support/capture.js';
import { figures } from './support/replay-figures.js';


describe('replay with a host tier', () => {
  const trace = generateWorkload({ requests: 300, seed: 11 });

  it('agrees with the model on every figure, host tier included', () => {
    const core = replaySync({ trace, numBlocks: 2500, hostBlocks: 12000 }) as HostTierReplayRun;
    const pool = new ModelHierarchyPool({ numBlocks: 2500, blockSize: 16, hostNumBlocks: 12000 });
    const model = runReplay(new ModelHierarchyReplayTarget(pool), trace, { blockSize: 16, maxRunning: 32, publishAfterPrefill: false });
    const { hostTier, ...device } = core;
    expect(figures(device)).toEqual(figures(model));
    expect(hostTier).toEqual({
      hostBlocks: 12000,
      deviceHitBlocks: model.matchedBlocks,
      hostHitBlocks: pool.hierarchyStats()[0]!.hostHitBlocks,
      blocksLoaded: pool.hierarchyStats()[0]!.blocksLoaded,
      blocksOffloaded: pool.hierarchyStats()[0]!.blocksOffloaded,
      hostCachedBlocksAtEnd: pool.hosts[0]!.numBlocksInPrefixCache(),
    });
    expect(hostTier.blocksLoaded).toBeGreaterThan(1000);
    expect(hostTier.blocksOffloaded).toBeGreaterThan(1000);
    expect(hostTier.hostHitBlocks).toBeGreaterThanOrEqual(hostTier.blocksLoaded);
  });

  it('leaves the device side exactly as without a host tier, and the default result unchanged', () => {
    const plain = replaySync({ trace, numBlocks: 2500 });
    expect('hostTier' in plain).toBe(false);
    const tiered = replaySync({ trace, numBlocks: 2500, hostBlocks: 5000 }) as HostTierReplayRun;
    const { hostTier: _h, ...device } = tiered;
    expect(figures(device)).toEqual(figures(plain));
    expect(() => replaySync({ trace, hostBlocks: 1 })).toThrow(/options.hostBlocks must be >= 2, got 1/);
  });

  it('kvpool replay --host-blocks reports the host tier', async () => {
    const json = await capture(() => main(['replay', '--json', '--requests', '60', '--num-blocks', '600', '--host-blocks', '4000']));
    const table = await capture(() => main(['replay', '--requests', '60', '--num-blocks', '600', '--host-blocks', '4000']));
    expect(json.code + table.code).toBe(0);
    const out = [json.out, table.out];
    const obj = JSON.parse(out[0]!) as HostTierReplayRun;
    const direct = replaySync({ requests: 60, numBlocks: 600, hostBlocks: 4000 }) as HostTierReplayRun;
    expect(obj.hostTier).toEqual(direct.hostTier);
    expect(obj.hostTier.blocksOffloaded).toBeGreaterThan(0);
    expect(out[1]).toMatch(/host hit blocks\s+\d+/);
    expect(out[1]).toMatch(/blocks loaded\s+\d+/);
    expect(out[1]).toMatch(/blocks offloaded\s+\d+/);
  });
});

describe('replay with a KV-cache store behind the host tier', () => {
  const trace = generateWorkload({ requests: 300, seed: 11 });
  const o = { trace, numBlocks: 1500, hostBlocks: 600 };

  it('leaves the device side as it was, writes every offloaded block, and loads more as the store grows', () => {
    const host = replaySync(o) as HostTierReplayRun;
    const small = replaySync({ ...o, storeBlocks: 1 }) as HostTierReplayRun;
    const big = replaySync({ ...o, storeBlocks: 1_000_000 }) as HostTierReplayRun;
    const device = (r: HostTierReplayRun) => figures((({ hostTier: _h, ...d }) => d)(r));
    expect(device(small)).toEqual(device(host));
    expect(device(big)).toEqual(device(host));
    for (const r of [small, big]) {
      const s = r.hostTier.store!;
      expect(s.blocksWritten).toBe(r.hostTier.blocksOffloaded);
      expect(s.blocksDelivered).toBeLessThanOrEqual(s.blocksRequested);
      expect(s.blocksAtEnd).toBeLessThanOrEqual(s.storeBlocks);
      expect(s.blocksAtEnd + s.blocksEvicted).toBeLessThanOrEqual(s.blocksWritten);
    }
    // A store of one block holds nothing a prefetch asks for in practice; a big one delivers,
    // and what it delivers is loaded to the device instead of recomputed.
    expect(big.hostTier.store!.blocksEvicted).toBe(0);
    expect(big.hostTier.store!.blocksDelivered).toBeGreaterThan(100);
    expect(big.hostTier.blocksLoaded).toBeGreaterThan(host.hostTier.blocksLoaded);
    expect('store' in host.hostTier).toBe(false);
  });

  it('kvpool replay --store-blocks reports the store', async () => {
    const args = ['--requests', '60', '--num-blocks', '600', '--host-blocks', '300', '--store-blocks', '5000'];
    const json = await capture(() => main(['replay', '--json', ...args]));
    const table = await capture(() => main(['replay', ...args]));
    expect(json.code + table.code).toBe(0);
    const obj = JSON.parse(json.out) as HostTierReplayRun;
    expect(obj.config.storeBlocks).toBe(5000);
    expect(obj.hostTier.store).toEqual((replaySync({ requests: 60, numBlocks: 600, hostBlocks: 300, storeBlocks: 5000 }) as HostTierReplayRun).hostTier.store);
    expect(table.out).toMatch(/store deliveries\s+[\d,]+/);
    expect(table.out).toMatch(/store blocks 5000/);
    const bad = await capture(() => main(['replay', '--requests', '5', '--store-blocks', '10']));
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/--store-blocks needs --host-blocks/);
  });
});
