// Runs a CLI entry point with stdout and stderr captured (test glue).

export interface Captured {
  code: number;
  out: string;
  err: string;
}

export function capture(fn: () => Promise<number>): Promise<Captured> {
  const out: string[] = [];
  const err: string[] = [];
  const o = process.stdout.write.bind(process.stdout);
  const e = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((s: string) => (out.push(s), true)) as typeof process.stdout.write;
  process.stderr.write = ((s: string) => (err.push(s), true)) as typeof process.stderr.write;
  return fn()
    .then((code) => ({ code, out: out.join(''), err: err.join('') }))
    .finally(() => {
      process.stdout.write = o;
      process.stderr.write = e;
    });
}

/**
 * `capture(fn)`, and `seen`: settles when stderr first carries `line` (a
 * command that says its work is done while it keeps its sockets open for a
 * while). `restore()` puts stderr back at once, for a test that fails before
 * the command ends.
 */
export function captureUntil(line: string, fn: () => Promise<number>): { run: Promise<Captured>; seen: Promise<void>; restore: () => void } {
  const write = process.stderr.write.bind(process.stderr);
  let done!: () => void;
  const seen = new Promise<void>((resolve) => (done = resolve));
  const run = capture(() => {
    const inner = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((s: string) => {
      if (s.includes(line)) done();
      return inner(s);
    }) as typeof process.stderr.write;
    return fn();
  });
  return { run, seen, restore: () => void (process.stderr.write = write) };
}
