// The folder layout is the architecture (docs/architecture.md): each layer of
// bindings/ imports only the layers below it, no file imports itself back
// through others, neither the benchmarks nor the library reach into the
// tests, and the reference model (model/) imports nothing of the library.
// Read from the sources' import statements.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../', import.meta.url).pathname;

/** Relative imports of every .ts file under `dir` (paths relative to the repository). */
function importGraph(dir: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })) {
    if (!f.endsWith('.ts')) continue;
    const file = join(dir, f);
    const text = readFileSync(join(ROOT, file), 'utf8');
    const deps: string[] = [];
    for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g)) {
      const spec = (m[1] ?? m[2])!;
      deps.push(normalize(join(dirname(file), spec)).replace(/\.js$/, '.ts'));
    }
    graph.set(file, deps);
  }
  return graph;
}

/** One cycle of the graph, or null. */
function findCycle(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const visit = (n: string): string[] | null => {
    state.set(n, 1);
    stack.push(n);
    for (const d of graph.get(n) ?? []) {
      if (!graph.has(d)) continue;
      if (state.get(d) === 1) return [...stack.slice(stack.indexOf(d)), d];
      if (!state.has(d)) {
        const c = visit(d);
        if (c) return c;
      }
    }
    stack.pop();
    state.set(n, 2);
    return null;
  };
  for (const n of graph.keys()) {
    if (state.has(n)) continue;
    const c = visit(n);
    if (c) return c;
  }
  return null;
}

/** The layer of a bindings/ file: its folder, or "top" for files directly in bindings/. */
function layer(file: string): string {
  const rel = relative('bindings', file).split('/');
  return rel.length > 1 ? rel[0]! : 'top';
}

// Lower layers first; a layer may import its own and the ones before it.
// (validate.ts, hash.ts, pair-table.ts and number-text.ts are "top" utilities the layers use;
// index*.ts and wasm-*.ts are entries, allowed to import everything.)
const ORDER = ['core', 'validate', 'managers', 'linear-state', 'ranks', 'pool', 'events', 'replay', 'timing', 'vllm', 'engines', 'fleet', 'measured', 'node', 'cli'];
const UTILITIES = new Set(['bindings/validate.ts', 'bindings/hash.ts', 'bindings/pair-table.ts', 'bindings/number-text.ts']);

function rank(file: string): number {
  if (UTILITIES.has(file)) return ORDER.indexOf('validate');
  const l = layer(file);
  return l === 'top' ? Infinity : ORDER.indexOf(l);
}

describe('the import graph', () => {
  const graph = importGraph('bindings');

  it('has no cycle between files of bindings/', () => {
    expect(graph.size).toBeGreaterThan(60);
    expect(findCycle(graph)).toBeNull();
  });

  it('goes down the layers only: core, managers, linear state, ranks, pool, events, replay, timing, vllm, engines, fleet, measured, node, cli', () => {
    const wrong: string[] = [];
    for (const [file, deps] of graph) {
      if (rank(file) === Infinity) continue; // an entry point
      expect(ORDER).toContain(UTILITIES.has(file) ? 'validate' : layer(file));
      for (const d of deps) if (rank(d) > rank(file)) wrong.push(`${file} -> ${d}`);
    }
    expect(wrong).toEqual([]);
  });

  it('the check can fail: a cycle is found when there is one', () => {
    expect(findCycle(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']]]))).toEqual(['a', 'b', 'c', 'a']);
  });

  it('neither the library nor the benchmarks import the tests', () => {
    const into = (dir: string, prefix: string) =>
      [...importGraph(dir)].flatMap(([f, deps]) => deps.filter((d) => d.startsWith(prefix)).map((d) => `${f} -> ${d}`));
    expect(into('bindings', 'test/')).toEqual([]);
    expect(into('bench', 'test/')).toEqual([]);
    // The reference model stays an independent oracle: nothing of the library or the core.
    expect(into('model', 'bindings/')).toEqual([]);
    expect(into('model', 'assembly/')).toEqual([]);
    expect(into('model', 'test/')).toEqual([]);
    expect(importGraph('model').size).toBeGreaterThan(10);
  });
});
