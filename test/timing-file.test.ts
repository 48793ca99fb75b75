// A timing file as `--timing` and readTimingFile meet it: read once, only a
// regular file, only up to MAX_TIMING_FILE_BYTES. A named pipe is refused at
// once (it used to be read twice, the second read waiting forever for a
// writer), a file larger than the limit is refused before it is read (one
// of 3 GB used to be read whole), and each refusal is one line naming the
// flag.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { MAX_TIMING_FILE_BYTES, readTimingFile, readTimingSpecFile } from '../bindings/node/timing-file.js';
import { capture } from './support/capture.js';
import { unknownGpuBundle } from './support/unknown-gpu-bundle.js';

const root = new URL('..', import.meta.url).pathname;
const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');
const dir = mkdtempSync(join(tmpdir(), 'kvpool-timing-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const fleetArgs = ['fleet', '--requests', '20', '--engines', '1', '--no-progress'];

describe('--timing reads a regular file once', () => {
  it.skipIf(process.platform === 'win32')('refuses a named pipe at once, with one line naming the flag (fleet, and the SLO search)', () => {
    const fifo = join(dir, 'gpu.json');
    spawnSync('mkfifo', [fifo]);
    for (const extra of [[], ['--slo-ttft-ms', '5000']]) {
      // A process of its own: reading a pipe with no writer would block this one for good.
      const r = spawnSync(process.execPath, [tsx, 'bindings/cli/main.ts', ...fleetArgs, '--timing', fifo, ...extra], { cwd: root, encoding: 'utf8', timeout: 30_000 });
      expect(r.signal, 'the command hung on the pipe').toBeNull();
      expect(r.status).toBe(1);
      expect(r.stderr).toBe(`kvpool: --timing ${fifo}: a named pipe, not a regular file; a timing table or spec is read from a .json or .csv file\n`);
    }
  });

  it('refuses a folder, naming the flag', async () => {
    const folder = join(dir, 'profiles.csv');
    spawnSync('mkdir', [folder]);
    const r = await capture(() => main([...fleetArgs, '--timing', folder]));
    expect(r.code).toBe(1);
    expect(r.err).toBe(`kvpool: --timing ${folder}: a directory, not a regular file; a timing table or spec is read from a .json or .csv file\n`);
  });

  it(`refuses a file over ${MAX_TIMING_FILE_BYTES} bytes without reading it (a sparse file of 3 GB)`, async () => {
    const big = join(dir, 'huge.csv');
    writeFileSync(big, 'phase,x,ms\nprefill,128,12.5\ndecode,1,7\n');
    truncateSync(big, 3 * 2 ** 30); // sparse: nothing written past the first line
    const r = await capture(() => main([...fleetArgs, '--timing', big]));
    expect(r.code).toBe(1);
    expect(r.err).toBe(`kvpool: --timing ${big}: 3,221,225,472 bytes, more than a timing file may hold (16,777,216 bytes, 16 MiB)\n`);
    // The library's reader refuses it the same way; one byte over the limit is enough.
    truncateSync(big, MAX_TIMING_FILE_BYTES + 1);
    expect(() => readTimingFile(big)).toThrow(RangeError);
    expect(() => readTimingFile(big)).toThrow(/16,777,217 bytes, more than a timing file may hold/);
    // At the limit it is read (and judged by its content: the NULs after the points are not a CSV line).
    truncateSync(big, MAX_TIMING_FILE_BYTES);
    expect(() => readTimingFile(big)).toThrow(/line 4: must be phase,x,ms/);
  });

  it('reads a table and a spec, each as fleet() takes it, a byte-order mark or not', async () => {
    const table = join(dir, 'gpu.json');
    rmSync(table, { force: true });
    writeFileSync(table, '\ufeff{"prefill": [[128, 12.5], [2048, 131]], "decode": [[1, 7.1], [32, 9.8]]}');
    expect(readTimingSpecFile(table)).toEqual(readTimingFile(table));
    const spec = join(dir, 'poly.json');
    writeFileSync(spec, '\ufeff{"kind": "polynomial", "baseMs": 3}');
    expect(readTimingSpecFile(spec)).toMatchObject({ kind: 'polynomial', baseMs: 3, prefillMsPerToken: 0.06 });
    const r = await capture(() => main([...fleetArgs, '--timing', spec, '--json']));
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).latency).toEqual(JSON.parse(JSON.stringify(fleetSync({ requests: 20, engines: 1, timing: { kind: 'polynomial', baseMs: 3 } }).latency, (k, v) => (k === 'requests' && typeof v === 'object' ? undefined : v))));
  });

  it('a value that is neither default nor a file: the hint names what --timing takes, with a "did you mean"', async () => {
    for (const [value, hint] of [['defualt', '; did you mean "default"?'], ['Default', '; did you mean "default"?'], ['true', ''], ['gpu.txt', '']] as const) {
      const r = await capture(() => main([...fleetArgs, '--timing', value]));
      expect(r.code).toBe(1);
      expect(r.err).toBe(`kvpool: --timing ${JSON.stringify(value)}: give default (the built-in polynomial) or a .json or .csv file${hint}\n`);
    }
  });
});

describe('a profile spec in a --timing file', () => {
  // The user's tree: the spec beside the bundle folder's tree, naming it by a path from there.
  const { root: tree, bundle } = unknownGpuBundle();
  const spec = join(tree, 'h100.json');
  writeFileSync(spec, JSON.stringify({ kind: 'profile', profile: relative(tree, bundle), gpuMemoryGib: 80 }));

  it('finds its bundle by a path from the spec file\'s folder, wherever the command runs', async () => {
    expect(relative(tree, bundle)).toBe(join('H100', 'meta-llama', 'Llama-3.1-8B', 'bf16'));
    expect(readTimingSpecFile(spec)).toEqual({ kind: 'profile', profile: bundle, gpuMemoryGib: 80 });
    // The current folder is the repository's, where H100/... is nothing.
    expect(process.cwd()).not.toBe(tree);
    const r = await capture(() => main([...fleetArgs, '--timing', spec, '--gpu-memory-utilization', '0.9', '--json']));
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out).config.profile).toBe(bundle);
  });

  it('keeps a preset\'s name and an absolute path as they are', () => {
    const preset = join(dir, 'preset.json');
    writeFileSync(preset, JSON.stringify({ kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b' }));
    expect(readTimingSpecFile(preset)).toEqual({ kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b' });
    const absolute = join(dir, 'absolute.json');
    writeFileSync(absolute, JSON.stringify({ kind: 'profile', profile: bundle }));
    expect(readTimingSpecFile(absolute)).toEqual({ kind: 'profile', profile: bundle });
  });
});
