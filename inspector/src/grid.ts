// The physical blocks of one dp rank on a canvas: one pixel per block in an
// offscreen image, written from the state codes in one pass and scaled up
// without smoothing, so 65,536 blocks cost one putImageData and one
// drawImage per frame.

import { STATE_PIXELS } from './colors.js';

export class BlockGrid {
  readonly canvas: HTMLCanvasElement;
  readonly cols: number;
  readonly rows: number;
  readonly cell: number;
  private readonly image: ImageData;
  private readonly pixels: Uint32Array;
  private readonly offscreen: HTMLCanvasElement;

  constructor(
    readonly numBlocks: number,
    width: number,
    onHover: (id: number | null, ev: MouseEvent) => void,
  ) {
    // Cells as large as fit about 0.6 of a width-by-width square, 1 to 24 px.
    this.cell = Math.max(1, Math.min(24, Math.floor(Math.sqrt((width * width * 0.6) / numBlocks))));
    this.cols = Math.max(1, Math.floor(width / this.cell));
    this.rows = Math.ceil(numBlocks / this.cols);
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'grid';
    this.canvas.width = this.cols * this.cell;
    this.canvas.height = this.rows * this.cell;
    this.canvas.dataset['cols'] = String(this.cols);
    this.canvas.dataset['cell'] = String(this.cell);
    this.offscreen = document.createElement('canvas');
    this.offscreen.width = this.cols;
    this.offscreen.height = this.rows;
    this.image = new ImageData(this.cols, this.rows);
    this.pixels = new Uint32Array(this.image.data.buffer);
    this.canvas.addEventListener('mousemove', (ev) => onHover(this.idAt(ev.offsetX, ev.offsetY), ev));
    this.canvas.addEventListener('mouseleave', (ev) => onHover(null, ev));
  }

  /** The block under canvas pixel (x, y), or null past the last block. */
  idAt(x: number, y: number): number | null {
    const c = Math.floor(x / this.cell);
    const r = Math.floor(y / this.cell);
    if (c < 0 || c >= this.cols || r < 0) return null;
    const id = r * this.cols + c;
    return id < this.numBlocks ? id : null;
  }

  draw(states: Uint8Array): void {
    const px = this.pixels;
    const n = this.numBlocks;
    for (let i = 0; i < n; i++) px[i] = STATE_PIXELS[states[i]!]!;
    this.offscreen.getContext('2d')!.putImageData(this.image, 0, 0);
    const ctx = this.canvas.getContext('2d')!;
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.drawImage(this.offscreen, 0, 0, this.cols * this.cell, this.rows * this.cell);
    if (this.cell >= 6) {
      // Gaps between large cells, so neighbouring blocks of one colour stay countable.
      ctx.fillStyle = '#ffffff';
      for (let c = 1; c < this.cols; c++) ctx.fillRect(c * this.cell - 1, 0, 1, this.canvas.height);
      for (let r = 1; r < this.rows; r++) ctx.fillRect(0, r * this.cell - 1, this.canvas.width, 1);
    }
  }
}
