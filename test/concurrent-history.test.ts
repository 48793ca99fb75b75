// Concurrency history check: worker threads run random operations on one
// ConcurrentBlockManagerImpl at once, each logging its calls with a sequence
// number taken under the manager's lock. The lock makes the calls atomic, so
// the history in sequence order is a serial execution: replayed on the model
// one call at a time it must give every result again (ids, hits, inserts,
// evictions), and every mid-run audit's view of the free stack and eviction
// order must be the model's at that point.

import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConcurrentBlockManagerImpl } from '../bindings/index.js';
import { ModelBlockManager } from '../model/block-manager-impl.js';
import { agree } from './support/agree.js';
import type { HistoryEntry, HistorySnapshot } from './support/concurrent-history.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

const BOOT = new URL('./support/ts-worker.mjs', import.meta.url);
const ENTRY = new URL('./support/concurrent-worker.ts', import.meta.url).href;

function runWorker(data: object): Promise<HistoryEntry[]> {
  const w = new Worker(BOOT, { workerData: { ...data, entry: ENTRY } });
  return new Promise<HistoryEntry[]>((resolve, reject) => {
    w.once('message', (m: { log: HistoryEntry[] }) => resolve(m.log));
    w.once('error', reject);
    w.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)));
  }).finally(() => w.terminate());
}

/** Replays `entry` on the model and returns what the model's call returned. */
function replay(model: ModelBlockManager, e: HistoryEntry): unknown {
  const c = e.call;
  switch (c.kind) {
    case 'allocate': return model.allocate(c.n);
    case 'deallocate': model.deallocate(c.ids); return null;
    case 'retain': model.retain(c.ids); return null;
    case 'match': return model.allocateShared(c.tokens);
    case 'cache': return model.cache(c.tokens, c.ids, c.existing);
    case 'evict': return model.evict(c.n);
    case 'check': return { free: [...model.free], evictionOrder: model.prefix.lruOrder() } satisfies HistorySnapshot;
  }
}

/** How often consecutive calls of the history come from different threads. */
function switches(history: HistoryEntry[]): number {
  let n = 0;
  for (let i = 1; i < history.length; i++) if (history[i]!.thread !== history[i - 1]!.thread) n++;
  return n;
}

async function run(threads: number, phases: number, opsPerPhase: number, numBlocks: number, blockSize: number, seed: number): Promise<void> {
  const m = new ConcurrentBlockManagerImpl({ numBlocks, blockSize });
  const sync = new SharedArrayBuffer(3 * 4);
  try {
    const logs = await Promise.all(
      Array.from({ length: threads }, (_, t) =>
        runWorker({ mode: 'history', desc: m.share(), sync, thread: t, threads, phases, opsPerPhase, seed: seed + t, ops: 0, tag: 0, owners: null, start: null }),
      ),
    );
    const history = logs.flat().sort((a, b) => a.seq - b.seq);
    // Every call got its own number, with no gaps: the lock numbered them one at a time.
    agree(history.map((e) => e.seq), history.map((_, i) => i), 'sequence numbers');
    // The threads really ran interleaved: each phase ends at a barrier all of
    // them reach, so each phase's calls come from every thread (at least
    // threads - 1 switches per phase) -- a history run on one thread fails this.
    expect(new Set(history.map((e) => e.thread)).size).toBe(threads);
    expect(switches(history)).toBeGreaterThanOrEqual(phases * (threads - 1));

    const model = new ModelBlockManager({ numBlocks, blockSize });
    let audits = 0;
    for (const e of history) {
      const got = replay(model, e);
      if (e.call.kind === 'check') audits++;
      agree(e.result, got, `call ${e.seq} (thread ${e.thread}): ${JSON.stringify(e.call)}`);
    }
    countSteps(history.length);
    expect(audits).toBeGreaterThan(0);
    // Every thread let go of everything: the end state is the model's.
    m.check();
    agree([Array.from(m.freeIds()), Array.from(m.lruOrder())], [model.free, model.prefix.lruOrder()], 'final free stack, eviction order');
    const st = m.stats();
    agree(
      [st.blocksAllocated, st.allocationFailures, st.matchCalls, st.blocksQueried, st.blocksHit, st.blocksInserted, st.blocksEvicted],
      [model.counters.blocksAllocated, model.counters.allocationFailures, model.counters.matchCalls, model.counters.blocksQueried,
        model.counters.blocksHit, model.counters.blocksInserted, model.counters.blocksEvicted],
      'counters',
    );
    expect(m.numUsedBlocks()).toBe(0);
  } finally {
    m.dispose();
  }
}

describe('ConcurrentBlockManagerImpl: concurrent histories replayed on the model', () => {
  it('four threads, tight pool: every result and every mid-run audit agrees with the serial replay', async () => {
    for (let i = 0; i < soak(2); i++) await run(4, 20, 100, 24, 2, 1000 + 97 * i);
  });

  it('two threads, roomier pool, longer blocks', async () => {
    for (let i = 0; i < soak(1); i++) await run(2, 30, 150, 64, 4, 5000 + 31 * i);
  });
});
