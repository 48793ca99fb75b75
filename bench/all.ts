// npm run bench: every benchmark in turn, each in a process of its own.
// npm passes arguments after `--` to the script's last command only, so this
// driver forwards them to the part they are for: --quick and --micro to the
// core-against-model tables (bench/index.ts); --micro runs that table alone.

import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsx = join(here, '..', 'node_modules', '.bin', 'tsx');
const args = process.argv.slice(2);
const parts: Array<[string, string[]]> = [['index.ts', args]];
if (!args.includes('--micro')) parts.push(['sweep.ts', []], ['concurrent.ts', []], ['events.ts', []], ['index-flood.ts', []], ['fleet.ts', []], ['fleet-time.ts', []], ['profile-time.ts', []], ['vllm.ts', []], ['validate.ts', []]);

for (const [file, partArgs] of parts) {
  const r = spawnSync(tsx, [join(here, file), ...partArgs], { stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`bench/${file} failed (${r.status ?? r.signal}); the parts after it did not run`);
    process.exit(r.status ?? 1);
  }
}
