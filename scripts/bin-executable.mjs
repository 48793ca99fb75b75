// After `tsc`: makes the package's bin files executable. tsc writes them
// 0644, and `npx kvpool` in the clone itself runs ./dist/cli/main.js
// directly (no install step links and chmods it there): "Permission denied".
//
//   node scripts/bin-executable.mjs [packageDir]   (default: this package)

import { chmodSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const dir = resolve(process.argv[2] ?? new URL('..', import.meta.url).pathname);
const { bin } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
for (const file of Object.values(typeof bin === 'string' ? { bin } : bin ?? {})) {
  const path = join(dir, file);
  chmodSync(path, statSync(path).mode | 0o111);
}
