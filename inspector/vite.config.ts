// The pool inspector: `npm run inspect` serves it, `npm run inspect:build`
// writes a static copy to dist-inspector/ (relative paths: any static server).

import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  build: { outDir: '../dist-inspector', emptyOutDir: true, target: 'es2022' },
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
});
