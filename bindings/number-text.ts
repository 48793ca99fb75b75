// Numbers for people, as every table, answer and report of kvpool prints
// them: thousands separated, a fixed count of decimals (7,962.20).

/** `x` with `digits` decimals and thousands separators. */
export function fixed(x: number, digits: number): string {
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
