// The report's HTML page, whatever was swept: a heading, the fixed options,
// warnings, one section per chart (inline SVG), the results table. No
// script, no stylesheet or font to fetch: it opens from file://.

/** A Vega-Lite specification with its data inline. */
export type VegaLiteSpec = Record<string, unknown>;

/** One chart: its heading, what it shows, and its Vega-Lite spec (null when the sweep has nothing to chart there). */
export interface ReportChart {
  id: string;
  title: string;
  explain: string;
  /** A Vega-Lite spec (kept as a plain object in the typings, so they need no Vega types). */
  spec: VegaLiteSpec | null;
  /** Why there is no chart (spec null). */
  missing?: string;
}

/** Line and paragraph separators as references: legal raw in HTML, but not in every tool that embeds or parses a page. */
const separators = (s: string) => s.replace(/\u2028/g, '&#x2028;').replace(/\u2029/g, '&#x2029;');

export const esc = (s: string) => separators(s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;'));

/** One cell of the results table: its text, and its raw value in data-value (read by tests and scripts). */
export interface ReportCell {
  key: string;
  text: string;
  value: string;
}

export interface ReportPage {
  /** "kvpool sweep: trace" (the <title>). */
  title: string;
  /** "kvpool sweep: trace, 8 configurations" (the <h1>). */
  heading: string;
  /** The fixed options, already escaped HTML. */
  fixed: string;
  warnings: readonly string[];
  charts: readonly ReportChart[];
  /** The SVG of each chart ('' where there is none). */
  svgs: readonly string[];
  head: readonly string[];
  rows: ReadonlyArray<readonly ReportCell[]>;
  /** The note under the table, HTML. */
  note: string;
  /** Answers to show above the charts (a fleet sweep's SLO answers), each a sentence; none: no section. */
  answers?: { title: string; lines: readonly string[] };
}

export function reportPage(p: ReportPage): string {
  const body = p.rows.map((cells) => `<tr>${cells.map((c) => `<td data-key="${c.key}" data-value="${esc(c.value)}">${esc(c.text)}</td>`).join('')}</tr>`);
  const warnings = p.warnings;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${esc(p.title)}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1360px; padding: 0 16px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 32px; }
p, ul, details { max-width: 1100px; }
.fixed, .explain, .missing { color: #555; }
table { border-collapse: collapse; margin-top: 8px; font-size: 12px; }
th, td { padding: 3px 6px; border-bottom: 1px solid #ddd; text-align: right; }
td { white-space: nowrap; }
th { background: #f4f4f4; vertical-align: bottom; font-weight: 600; }
figure { margin: 8px 0; } svg { max-width: 100%; height: auto; }
.warn { color: #8a4b00; }
</style>
</head>
<body>
<h1>${esc(p.heading)}</h1>
<p class="fixed">Fixed: ${p.fixed}.</p>
${warnings.length > 0 ? `<details class="warn"><summary>${warnings.length} warning${warnings.length > 1 ? 's' : ''}</summary><ul>${warnings.map((w) => `<li>${esc(w)}</li>`).join('')}</ul></details>` : ''}
${p.answers !== undefined ? `<section id="answers">\n<h2>${esc(p.answers.title)}</h2>\n<ul>${p.answers.lines.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>\n</section>` : ''}
${p.charts
  .map(
    (c, i) => `<section id="${c.id}">
<h2>${esc(c.title)}</h2>
${c.spec ? `<p class="explain">${esc(c.explain)}</p>\n<figure>${separators(p.svgs[i] ?? '')}</figure>` : `<p class="missing">${esc(c.missing ?? '')}</p>`}
</section>`,
  )
  .join('\n')}
<section id="results">
<h2>Results</h2>
<table>
<thead><tr>${p.head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead>
<tbody>
${body.join('\n')}
</tbody>
</table>
<p class="explain">${p.note}</p>
</section>
</body>
</html>
`;
}
