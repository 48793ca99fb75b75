// The command line speaks its own language: every refusal names flags and
// values as a user types them (not the library's slidingWindow, scheduler
// 'continuous' or "true for the default model"), and a hint's suggestion is
// accepted when followed; a value that is itself a flag is refused naming
// both; a near-miss gets a "did you mean"; --help prints defaults as they
// are typed.

import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { capture } from './support/capture.js';

const small = ['--requests', '6', '--no-progress'];

/** Refusals, each with the suggestions it makes (flags and values that must then be accepted). */
const refusals: Array<{ args: string[]; message: string; follow?: string[][] }> = [
  { args: ['fleet', '--speedup', '2'], message: 'kvpool: --speedup applies to a timed fleet: give --timing default or --scheduler continuous', follow: [['--timing', 'default'], ['--scheduler', 'continuous']] },
  { args: ['fleet', '--concurrency', '2'], message: 'kvpool: --concurrency applies to a timed fleet: give --timing default or --scheduler continuous', follow: [['--timing', 'default'], ['--scheduler', 'continuous']] },
  { args: ['fleet', '--scheduler', 'continuous', '--sliding-window', '64'], message: 'kvpool: --scheduler continuous runs plain pools and the host tier; --sliding-window and --linear-state-slots need --scheduler xllm', follow: [['--scheduler', 'xllm']] },
  { args: ['fleet', '--timing', 'default', '--max-num-batched-tokens', '100'], message: 'kvpool: --max-num-batched-tokens applies to --scheduler continuous or --engine vllm', follow: [['--scheduler', 'continuous'], ['--engine', 'vllm']] },
  { args: ['fleet', '--engine', 'vllm', '--scheduler', 'continuous'], message: 'kvpool: --scheduler continuous cannot be used with --engine vllm: the vllm engine brings its own scheduler; to keep time in milliseconds give --timing default' },
  { args: ['fleet', '--timing', 'default', '--threads', '2'], message: 'kvpool: --threads 2: a timed fleet runs in one thread; leave --threads out' },
  { args: ['fleet', '--eviction', 'lfu', '--sliding-window', '64'], message: 'kvpool: --eviction lfu cannot be combined with --sliding-window (a composite pool has no prefix cache)' },
  { args: ['fleet', '--slo-ttft-ms', '5'], message: 'kvpool: --slo-ttft-ms needs a timed fleet: give --timing default (or a timing file), --profile or --scheduler continuous', follow: [['--timing', 'default'], ['--profile', 'rtxpro6000/llama-3.1-8b'], ['--scheduler', 'continuous']] },
  {
    args: ['sweep', '--scheduler', 'continuous', '--sliding-window', '64'],
    message: 'kvpool: configuration 1 (--num-blocks 65536 --block-size 16 --dp-size 1 --max-running 32 --seed 1024 --eviction lru --sliding-window 64 --scheduler continuous --engines 4 --router round-robin): --scheduler continuous runs plain pools and the host tier; --sliding-window and --linear-state-slots need --scheduler xllm',
  },
];

describe('refusals in the command line\'s words', () => {
  for (const { args, message, follow } of refusals) {
    it(args.join(' '), async () => {
      const r = await capture(() => main([...args, ...small]));
      expect(r.code).toBe(1);
      expect(r.err).toBe(`${message}\n`);
      // Nothing of the library's spelling: options.x, camelCase names, quoted values, `true`.
      expect(r.err).not.toMatch(/options\.|\b[a-z]+[A-Z]\w*\b|'[a-z-]+'|\btrue\b/);
      // What the hint says to give is taken (with the flags that were refused dropped where the hint replaces them).
      for (const fix of follow ?? []) {
        const kept = args.filter((a, i) => !(a === fix[0] || args[i - 1] === fix[0]));
        const ok = await capture(() => main([...kept, ...fix, ...small, '--json']));
        expect(ok.err, `${[...kept, ...fix].join(' ')}`).not.toMatch(/^kvpool: (?!warning)/m);
        expect(ok.code, `${[...kept, ...fix].join(' ')}`).toBe(0);
      }
    });
  }
});

describe('values', () => {
  it('a value that is itself a flag is refused, naming both (not read as a file, then "two traces")', async () => {
    const r = await capture(() => main(['fleet', '--timing', '--scheduler', 'continuous', ...small]));
    expect(r.code).toBe(1);
    expect(r.err).toContain("--timing needs a value, and --scheduler is a flag: give the value right after --timing");
    expect(r.err).not.toMatch(/two traces/);
    // A negative number is a value (refused as a number), and - is stdin.
    const neg = await capture(() => main(['fleet', '--speedup', '-1', ...small]));
    expect(neg.err).toContain('--speedup must be a number > 0, got "-1"');
  });

  it('a near miss of a choice gets a "did you mean"', async () => {
    const cases: Array<[string[], string]> = [
      [['fleet', '--scheduler', 'contnuous'], '--scheduler must be one of xllm, continuous, got "contnuous"; did you mean "continuous"?'],
      [['sweep', '--scheduler', 'xlm'], '--scheduler must be among xllm, continuous, got "xlm"; did you mean "xllm"?'],
      [['fleet', '--router', 'rund-robin'], 'got "rund-robin"; did you mean "round-robin"?'],
      [['sweep', '--router', 'least-load'], 'got "least-load"; did you mean "least-loaded"?'],
      [['replay', '--eviction', 'LRU'], '--eviction must be one of lru, lfu, priority, got "LRU"; did you mean "lru"?'],
      [['sweep', '--eviction', 'lfuu'], 'got "lfuu"; did you mean "lfu"?'],
      [['fleet', '--format', 'jsn'], 'got "jsn"; did you mean "json"?'],
      [['fleet', '--arrival', 'instnt'], 'got "instnt"; did you mean "instant"?'],
    ];
    for (const [args, said] of cases) {
      const r = await capture(() => main([...args, ...small]));
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.err, args.join(' ')).toContain(said);
    }
    // Far from every choice: no guess.
    const far = await capture(() => main(['fleet', '--scheduler', 'fifo', ...small]));
    expect(far.err).not.toContain('did you mean');
  });
});

describe('--help', () => {
  it('prints defaults and choices as they are typed, and no default for a switch', async () => {
    for (const cmd of ['replay', 'fleet', 'sweep']) {
      const r = await capture(() => main([cmd, '--help']));
      expect(r.code).toBe(0);
      const text = r.out.replace(/\s+/g, ' ');
      expect(text, cmd).not.toMatch(/default: \[|default: "|default: false|default: true|choices: "/);
    }
    const fleet = (await capture(() => main(['fleet', '--help']))).out.replace(/\s+/g, ' ');
    expect(fleet).toContain('(default: 4)');
    expect(fleet).toMatch(/--eviction <policy> .*\(choices: lru, lfu, priority, default: lru\)/);
    expect(fleet).toMatch(/--json the same as --format json --per-request/);
  });
});
