// The CSV files of a profile bundle (docs/timing.md, the bundle), read
// strictly: the header must be the format's, every line has its cells, and a
// refusal names the file and the line. No quoting: the format has none.

export interface CsvTable {
  /** The cells of each data line, in file order. */
  readonly rows: string[][];
  /** The 1-based line number of each row in the file. */
  readonly lines: number[];
}

/** Rows of `text` whose header is exactly `columns` (a byte-order mark, CR line ends and blank lines are allowed). */
export function readCsv(where: string, text: string, columns: readonly string[]): CsvTable {
  if (typeof text !== 'string') throw new TypeError(`${where} must be the file's text, got ${typeof text}`);
  const lines = (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text).split('\n');
  const head = (lines[0] ?? '').replace(/\r$/, '').split(',').map((c) => c.trim());
  if (head.join(',') !== columns.join(',')) throw new TypeError(`${where} line 1: the header must be "${columns.join(',')}", got ${JSON.stringify(lines[0] ?? '')}`);
  const rows: string[][] = [];
  const at: number[] = [];
  for (let i = 1; i < lines.length; i++) {
    const l = lines[i]!.replace(/\r$/, '');
    if (l.trim() === '') continue;
    const cells = l.split(',').map((c) => c.trim());
    if (cells.length !== columns.length) throw new TypeError(`${where} line ${i + 1}: must have ${columns.length} cells (${columns.join(',')}), got ${JSON.stringify(l)}`);
    rows.push(cells);
    at.push(i + 1);
  }
  if (rows.length === 0) throw new TypeError(`${where}: no data lines under the header`);
  return { rows, lines: at };
}

/** A number cell: finite, at least `min`, an integer when asked. */
export function cellNumber(where: string, line: number, column: string, s: string, min: number, integer: boolean): number {
  const v = s === '' ? NaN : Number(s);
  if (!Number.isFinite(v) || v < min || (integer && !Number.isInteger(v))) {
    throw new RangeError(`${where} line ${line}: ${column} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got ${JSON.stringify(s)}`);
  }
  return v;
}
