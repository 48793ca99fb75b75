// Line plots of the session's samples over time (x = requests replayed).

import type { Samples, SeriesName } from './session.js';

export interface Line {
  series: SeriesName;
  label: string;
  color: string;
}

export class Plot {
  readonly canvas: HTMLCanvasElement;
  constructor(
    readonly title: string,
    readonly lines: Line[],
    /** Fixed y maximum, or null to fit the data. */
    private readonly yMax: () => number | null,
    readonly format: (v: number) => string,
    width = 420,
    height = 150,
  ) {
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'plot';
    this.canvas.width = width;
    this.canvas.height = height;
  }

  draw(samples: Samples): void {
    const ctx = this.canvas.getContext('2d')!;
    const W = this.canvas.width;
    const H = this.canvas.height;
    const R = 8, T = 20, B = 30;
    ctx.clearRect(0, 0, W, H);
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#1f2328';
    ctx.fillText(this.title, 4, 12);
    const n = samples.length;
    const xs = samples.columns.step;
    const xMax = Math.max(1, n > 0 ? xs[n - 1]! : 1);
    let yMax = this.yMax();
    if (yMax === null) {
      yMax = 1;
      for (const l of this.lines) {
        const c = samples.columns[l.series];
        for (let i = 0; i < n; i++) if (c[i]! > yMax) yMax = c[i]!;
      }
    }
    // The left margin fits the widest y label (131,070 blocks needs more than 5 %).
    const yTop = this.format(yMax);
    const L = Math.ceil(Math.max(ctx.measureText(yTop).width, ctx.measureText(this.format(0)).width)) + 10;
    ctx.strokeStyle = '#c8ccd0';
    ctx.lineWidth = 1;
    ctx.strokeRect(L + 0.5, T + 0.5, W - L - R, H - T - B);
    ctx.fillStyle = '#57606a';
    ctx.textAlign = 'right';
    ctx.fillText(yTop, L - 4, T + 9);
    ctx.fillText(this.format(0), L - 4, H - B);
    // x: requests replayed, 0 at the left, the count so far at the right.
    const xLabel = H - B + 12;
    ctx.textAlign = 'left';
    ctx.fillText('0', L, xLabel);
    ctx.textAlign = 'right';
    ctx.fillText(xMax.toLocaleString('en-US'), W - R, xLabel);
    ctx.textAlign = 'center';
    ctx.fillText('requests replayed', L + (W - L - R) / 2, H - 4);
    ctx.textAlign = 'left';
    let lx = 4 + ctx.measureText(this.title).width + 12;
    for (const l of this.lines) {
      const c = samples.columns[l.series];
      ctx.strokeStyle = l.color;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      for (let i = 0; i < n; i++) {
        const x = L + ((W - L - R) * xs[i]!) / xMax;
        const y = H - B - ((H - T - B) * c[i]!) / yMax;
        if (i === 0) ctx.moveTo(x, y);
        else ctx.lineTo(x, y);
      }
      ctx.stroke();
      ctx.fillStyle = l.color;
      const text = `${l.label} ${n > 0 ? this.format(c[n - 1]!) : ''}`;
      ctx.fillText(text, lx, 12);
      lx += ctx.measureText(text).width + 10;
    }
  }
}
