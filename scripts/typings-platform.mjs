// After `tsc -p tsconfig.build.json`: makes the published typings compile
// with "lib": ["ES2022"] alone (no DOM, no @types/node). The public API names
// a few platform types (WebAssembly.Module, Memory and Instance, Response, URL) that
// only DOM or @types/node declare; this adds empty declarations of them,
// which merge with the real ones wherever those are present, and references
// them from both entries' .d.ts. tsc cannot emit this itself: declaration
// output drops /// <reference path> directives.
//
//   node scripts/typings-platform.mjs [outDir]   (default dist)

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2] ?? 'dist';
const NAME = 'platform-globals.d.ts';

writeFileSync(
  join(out, NAME),
  `// Platform types kvpool's API names, declared empty so that the typings
// compile without DOM or @types/node; they merge with the full declarations
// where a program has them.
declare global {
  interface Response {}
  interface URL {}
  namespace WebAssembly {
    interface Module {}
    interface Memory {}
    interface Instance {}
  }
}
export {};
`,
);

const ref = `/// <reference path="./${NAME}" />\n`;
for (const entry of ['index.d.ts', 'index.node.d.ts']) {
  const file = join(out, entry);
  const text = readFileSync(file, 'utf8');
  if (!text.startsWith(ref)) writeFileSync(file, ref + text);
}
