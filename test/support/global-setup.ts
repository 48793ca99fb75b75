// Global setup of the vitest run: gives every test file a file to report its
// random-step count to (see steps.ts), and prints the total at the end.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    kvpoolStepsFile: string;
  }
}

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'kvpool-steps-'));
  const file = join(dir, 'steps.tsv');
  writeFileSync(file, '');
  project.provide('kvpoolStepsFile', file);
  return () => {
    const perFile = new Map<string, number>();
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const [name, n] = line.split('\t');
      if (name && n) perFile.set(name, (perFile.get(name) ?? 0) + Number(n));
    }
    rmSync(dir, { recursive: true, force: true });
    if (perFile.size === 0) return;
    const total = [...perFile.values()].reduce((a, b) => a + b, 0);
    const rows = [...perFile].sort((a, b) => b[1] - a[1]).map(([f, n]) => `  ${String(n).padStart(9)}  ${relative(process.cwd(), f)}`);
    console.log(`\nrandom operation steps (generated operations run and compared): ${total}\n${rows.join('\n')}`);
  };
}
