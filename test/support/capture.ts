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
