// Browser-safe default: `loadCore()` with no argument stream-compiles the
// package's build/kvpool.wasm, found relative to this module (dist/ or
// bindings/ alike), so a static server or a bundler that understands
// `new URL(…, import.meta.url)` (Vite, webpack 5, Rollup plugins) serves it.
// loadCore hands a Response to WebAssembly.compileStreaming, which compiles
// while the bytes arrive. The Node entry registers a file loader
// that takes precedence over this fallback.

import { setDefaultSource } from './core/plain-core.js';

setDefaultSource(() => fetch(new URL('../build/kvpool.wasm', import.meta.url)), true);
