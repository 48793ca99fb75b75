// Node-only: finds build/kvpool.wasm next to the package and loads it
// synchronously on first use, so constructors work without an `await`.

import { readFileSync } from 'node:fs';
import { setDefaultSource, setSyncLoader } from './core/instance.js';

const wasmUrl = new URL('../build/kvpool.wasm', import.meta.url);

setSyncLoader(() => new WebAssembly.Module(readFileSync(wasmUrl)));
setDefaultSource(() => readFileSync(wasmUrl));
