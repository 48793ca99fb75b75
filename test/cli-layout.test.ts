// The command line lives in bindings/cli/: no library folder imports it or
// the packages only it needs, so a program importing kvpool never loads
// commander, the progress bar or the CSV writer (and browsers never see them).

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

const root = new URL('../bindings/', import.meta.url).pathname;
const CLI_ONLY = ['commander', 'cli-progress', 'csv-stringify'];

it('only bindings/cli/ imports the command line and its packages', () => {
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && !f.startsWith('cli/'));
  expect(files.length).toBeGreaterThan(40);
  const offenders: string[] = [];
  for (const f of files) {
    const text = readFileSync(join(root, f), 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      const spec = m[1]!;
      if (CLI_ONLY.some((p) => spec === p || spec.startsWith(`${p}/`)) || /(^|\/)cli\//.test(spec)) offenders.push(`${f}: ${spec}`);
    }
  }
  expect(offenders).toEqual([]);
  // The check can fail: the command itself does import them.
  expect(readFileSync(join(root, 'cli/options.ts'), 'utf8')).toMatch(/from 'commander'/);
});
