// The vLLM harness's recorded runs (test/fixtures/vllm/, see its README):
// each configuration's figures as the harness printed them, and its
// per-step lines.

import { readFileSync, readdirSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

export const FIXTURES = new URL('../fixtures/vllm/', import.meta.url).pathname;

/** A recorded run: what the harness printed (figures and its configuration). */
export interface HarnessRun {
  name: string;
  requests: number;
  rejected: number;
  truncated: number;
  preemptions: number;
  finished: number;
  steps: number;
  scheduledTokens: number;
  promptBlocks: number;
  matchedBlocks: number;
  hitRate: number;
  evictedBlocks: number;
  allocatedBlocks: number;
  idChecksum: number;
  freeBlocksAtEnd: number;
  cachedBlocksAtEnd: number;
  cachedKeysAtEnd: number;
  allocateCalls?: number;
  config: {
    blockSize: number;
    numBlocks: number;
    maxRunning: number;
    limit: number | null;
    maxNumBatchedTokens: number;
    longPrefillTokenThreshold: number;
    /** Only the throwaway drivers' runs say it: the real harness runs with it off. */
    reserveFullIsl?: boolean;
    dpSize?: number;
  };
  /** The trace it replayed: the Mooncake conversation trace unless a small one is named. */
  trace: string;
}

/** The figures both implementations define the same way. */
export const HARNESS_FIGURES = [
  'requests', 'rejected', 'truncated', 'preemptions', 'finished', 'steps', 'scheduledTokens', 'promptBlocks', 'matchedBlocks', 'hitRate',
  'evictedBlocks', 'allocatedBlocks', 'idChecksum', 'freeBlocksAtEnd', 'cachedBlocksAtEnd', 'cachedKeysAtEnd',
] as const;

const SMALL_TRACES: Record<string, string> = { t1: 't1.jsonl', o0: 'o0.jsonl', edge40_n40_w3_t40: 'edge40.jsonl', edge40_n400_w8: 'edge40.jsonl' };

export function harnessRun(name: string): HarnessRun {
  const r = JSON.parse(readFileSync(`${FIXTURES}${name}.json`, 'utf8')) as HarnessRun;
  return { ...r, name, trace: SMALL_TRACES[name] ?? 'mooncake-conversation' };
}

/** Every recorded run with a per-step file (the whole-trace ones have none). */
export function harnessRuns(): HarnessRun[] {
  return readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.steps.gz'))
    .map((f) => harnessRun(f.slice(0, -'.steps.gz'.length)));
}

/** The harness's per-step lines, as it wrote them. */
export function harnessSteps(name: string): string {
  return gunzipSync(readFileSync(`${FIXTURES}${name}.steps.gz`)).toString('utf8');
}

/** The small traces recorded beside the runs. */
export function smallTrace(file: string): string {
  return readFileSync(`${FIXTURES}${file}`, 'utf8');
}
