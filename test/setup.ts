// Every test runs against the Node entry: the core loads synchronously from build/.
import '../bindings/wasm-node.js';
