// What `npm install kvpool` gets: the built typings compile with
// "lib": ["ES2022"] alone (no DOM), the source maps carry their sources, the
// tarball holds the core, the CLI, the built-in trace and the docs the CLI points to, and zeromq is an
// optional peer, not something every user downloads.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { builtPackage, ROOT as root } from './support/built-package.js';

let out = '';
const tsc = join(root, 'node_modules/typescript/bin/tsc');

function files(dir: string, suffix: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith(suffix)).map((f) => join(dir, f));
}

/**
 * Type-checks `code` as a consumer of the built package would, with the
 * given compiler options; `installed`: from a folder beside the package's
 * node_modules, so that `'kvpool'` resolves through its package.json.
 */
function consumer(code: string, options: object, installed = false): string {
  const dir = mkdtempSync(join(installed ? join(out, '../../..') : tmpdir(), 'kvpool-consumer-'));
  writeFileSync(join(dir, 'main.ts'), code.replaceAll('DIST', out));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false, typeRoots: [join(root, 'node_modules/@types')], ...options },
      files: ['main.ts'],
    }),
  );
  const r = spawnSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8' });
  return r.stdout + r.stderr;
}

describe('the built package', () => {
  beforeAll(async () => {
    // What `npm run build:ts` does, into a scratch folder.
    out = join(await builtPackage(), 'node_modules/kvpool/dist');
  }, 240_000);

  it('typings compile under "lib": ["ES2022"] with no DOM and no Node types (the platform entry)', () => {
    const code = `import { BlockManagerPool, Sequence, loadCore, replay, type WasmSource } from 'DIST/index.js';
export async function run(src: WasmSource): Promise<number> {
  await loadCore(src);
  const pool = new BlockManagerPool({ numBlocks: 64, blockSize: 16 });
  pool.allocate(new Sequence([1, 2, 3]));
  const r = await replay({ requests: 5, dpSize: 2 });
  return r.mode === 'host-tier' ? r.hostTier.blocksLoaded : r.hitRate;
}
`;
    expect(consumer(code, { lib: ['ES2022'], types: [] })).toBe('');
    // The same file where DOM is there: the declarations merge with DOM's.
    expect(consumer(code, { lib: ['ES2022', 'DOM'], types: [] })).toBe('');
  });

  it("'kvpool' resolves to the typings of the entry its runtime gets: no Node types needed outside Node", () => {
    const code = `import { BlockManagerPool, Sequence, replay } from 'kvpool';
export async function run(): Promise<number> {
  const pool = new BlockManagerPool({ numBlocks: 64, blockSize: 16 });
  pool.allocate(new Sequence([1, 2, 3]));
  return (await replay({ requests: 5 })).hitRate;
}
`;
    // A bundler's resolution (a browser or worker build): the platform entry's typings.
    for (const lib of [['ES2022'], ['ES2022', 'DOM']]) {
      expect(consumer(code, { module: 'ESNext', moduleResolution: 'Bundler', lib, types: [] }, true)).toBe('');
    }
    // Node's resolution: the Node entry, with what only it exports.
    const node = `${code}export { readTraceFile } from 'kvpool';\n`;
    expect(consumer(node, { lib: ['ES2022'], types: ['node'] }, true)).toBe('');
  });

  it('the Node entry compiles with Node types and no DOM', () => {
    const code = `import { replay, sweep, readTraceFile } from 'DIST/index.node.js';
export async function run(): Promise<number> {
  const t = await readTraceFile('mooncake-conversation', { limit: 10 });
  const runs = await sweep({ trace: t, grid: { numBlocks: [64, 128] } });
  const r = await replay({ trace: 'mooncake-conversation', limit: 10 });
  return runs.length + r.requests;
}
`;
    expect(consumer(code, { lib: ['ES2022'], types: ['node'] })).toBe('');
  });

  it('every source map carries the source it maps', () => {
    const maps = files(out, '.js.map');
    expect(maps.length).toBeGreaterThan(40);
    for (const m of maps) {
      const map = JSON.parse(readFileSync(m, 'utf8')) as { sources: string[]; sourcesContent?: string[] };
      expect(map.sourcesContent?.length, relative(out, m)).toBe(map.sources.length);
      const src = resolve(join(m, '..'), map.sources[0]!).replace(out, join(root, 'bindings'));
      expect(map.sourcesContent![0], relative(out, m)).toBe(readFileSync(src, 'utf8'));
    }
  });

  it("the command line's bin runs as a program, as `npx kvpool` in the clone runs it (tsc writes it without the executable bit)", () => {
    const bin = join(out, 'cli/main.js');
    expect(statSync(bin).mode & 0o111).toBe(0o111);
    // Executed as a file, not through node: the kernel refuses a file without the bit (EACCES). (The CLI's
    // own dependencies are not in this scratch install, so what it prints is not looked at here.)
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    expect(r.error, String(r.error)).toBeUndefined();
  });

  it('the tarball holds the cores, the built-in trace and its notice, the profile presets with their licence, the docs, and no sources or tests', () => {
    const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const listed = (JSON.parse(r.stdout) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map((f) => f.path);
    for (const f of ['traces/mooncake-conversation.jsonl.gz', 'traces/README.md', 'README.md', 'package.json']) expect(listed).toContain(f);
    for (const f of ['profiles/README.md', 'profiles/LICENSE.LLMServingSim', 'profiles/RTXPRO6000/Qwen/Qwen3-32B/bf16/tp2/attention.csv.gz', 'profiles/models/meta-llama/Llama-3.1-8B.json', 'profiles/architectures/qwen3_moe.yaml']) expect(listed).toContain(f);
    if (existsSync(join(root, 'build/kvpool.wasm'))) expect(listed).toContain('build/kvpool.wasm');
    // The docs that the CLI's output, its errors, the code and the shipped READMEs point to ship with them (docs/img too).
    const docs = files(join(root, 'docs'), '').map((f) => relative(root, f).split('\\').join('/')).filter((f) => /\.(md|svg|png)$/.test(f));
    expect(docs).toContain('docs/validation.md');
    expect(docs.filter((f) => !listed.includes(f))).toEqual([]);
    const cited = new Set<string>();
    for (const f of ['README.md', 'profiles/README.md', 'measured/README.md', 'traces/README.md', ...files(join(root, 'bindings'), '.ts').map((x) => relative(root, x))]) {
      for (const m of readFileSync(join(root, f), 'utf8').matchAll(/docs\/([\w.-]+\.md)/g)) cited.add(`docs/${m[1]}`);
    }
    expect(cited.size).toBeGreaterThan(10);
    expect([...cited].filter((f) => !listed.includes(f))).toEqual([]);
    expect(listed.filter((f) => /^(test|bindings|assembly|bench|inspector)\//.test(f))).toEqual([]);
  });

  it('zeromq is an optional peer: nobody downloads it unless they publish over ZeroMQ', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(pkg.dependencies?.zeromq).toBeUndefined();
    expect(pkg.optionalDependencies?.zeromq).toBeUndefined();
    expect(pkg.peerDependencies.zeromq).toBeDefined();
    expect(pkg.peerDependenciesMeta.zeromq.optional).toBe(true);
    expect(pkg.bin.kvpool).toBe('./dist/cli/main.js');
  });
});
