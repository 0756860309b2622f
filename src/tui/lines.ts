import { cellText, type Cell, type CellTable, type Tone } from '../views/cells.js';

/** A run of text with its meaning; the Ink layer maps tone and owner to colours. */
export interface Segment {
  text: string;
  tone?: Tone;
  /** Index into the owner palette (the shard grid and its legend). */
  owner?: number;
  bold?: boolean;
  inverse?: boolean;
}

/** One terminal row. Every pane is a list of these, so sizes are exact and testable. */
export type Line = Segment[];

export const seg = (text: string, tone?: Tone, extra: Omit<Segment, 'text' | 'tone'> = {}): Segment => ({ text, ...(tone ? { tone } : {}), ...extra });

export function lineWidth(line: Line): number {
  return line.reduce((a, s) => a + s.text.length, 0);
}

/** Cuts a line to `width` columns (an ellipsis marks the cut). */
export function clip(line: Line, width: number): Line {
  if (width <= 0) return [];
  if (lineWidth(line) <= width) return line;
  const out: Line = [];
  let left = width - 1;
  for (const s of line) {
    if (left <= 0) break;
    const t = s.text.slice(0, left);
    out.push({ ...s, text: t });
    left -= t.length;
  }
  out.push({ text: '…', tone: 'muted' });
  return out;
}

export function pad(line: Line, width: number): Line {
  const c = clip(line, width);
  const w = lineWidth(c);
  return w < width ? [...c, { text: ' '.repeat(width - w) }] : c;
}

/**
 * Column widths for a cell table: each column as wide as its widest cell, capped; room left over
 * goes back to the capped columns in order (a wide terminal shows a drain reason whole), and when
 * the table is too wide the widest columns shrink first.
 */
export function columnWidths(t: CellTable, width: number, caps: number[] = []): number[] {
  const n = t.head.length;
  const natural = t.head.map((h, i) => Math.max(h.length, ...t.rows.map((r) => cellText(r[i], { compact: true }).length)));
  const widths = natural.map((w, i) => Math.min(caps[i] ?? 40, w));
  let spare = width - (widths.reduce((a, w) => a + w, 0) + (n - 1) * 2);
  for (let i = 0; i < n && spare > 0; i++) {
    const grow = Math.min(spare, natural[i] - widths[i]);
    if (grow > 0) {
      widths[i] += grow;
      spare -= grow;
    }
  }
  const total = widths.reduce((a, w) => a + w, 0) + (n - 1) * 2;
  if (total > width) {
    // Shrink the widest columns first until it fits (never below 4).
    let over = total - width;
    while (over > 0) {
      const i = widths.indexOf(Math.max(...widths));
      if (widths[i] <= 4) break;
      widths[i]--;
      over--;
    }
  }
  return widths;
}

function fit(text: string, w: number, right: boolean): string {
  if (text.length > w) return w <= 1 ? text.slice(0, w) : `${text.slice(0, w - 1)}…`;
  return right ? text.padStart(w) : text.padEnd(w);
}

const RIGHT_UNITS = new Set(['count', 'age', 'duration', 'load']);

/** A cell table as lines: a muted head, then one line per row; numbers right-aligned. */
export function tableLines(t: CellTable, width: number, opts: { caps?: number[]; prefix?: (row: number) => Segment } = {}): { head: Line; rows: Line[] } {
  const pw = opts.prefix ? 2 : 0;
  const widths = columnWidths(t, width - pw, opts.caps);
  const head: Line = [{ text: ' '.repeat(pw) }, ...t.head.map((h, i) => seg(`${fit(h, widths[i], false)}${i < widths.length - 1 ? '  ' : ''}`, 'muted'))];
  const rows = t.rows.map((r, ri) => {
    const line: Line = opts.prefix ? [opts.prefix(ri)] : [];
    r.forEach((c: Cell, i) => line.push(seg(`${fit(cellText(c, { compact: true }), widths[i], RIGHT_UNITS.has(c.unit))}${i < r.length - 1 ? '  ' : ''}`, c.tone === 'normal' ? undefined : c.tone)));
    return line;
  });
  return { head, rows };
}

const SPARKS = '▁▂▃▄▅▆▇█';

/** Depth over time as a sparkline, scaled to its own maximum; empty history gives an empty string. */
export function sparkline(values: readonly number[], width: number): string {
  const v = values.slice(-width);
  if (v.length === 0) return '';
  const max = Math.max(...v);
  if (max <= 0) return SPARKS[0].repeat(v.length);
  return v.map((x) => SPARKS[Math.min(SPARKS.length - 1, Math.floor((x / max) * (SPARKS.length - 1) + 0.5))]).join('');
}

/** A load bar: used of max in `width` cells. */
export function loadBar(used: number, max: number, width: number): string {
  const filled = max > 0 ? Math.min(width, Math.round((used / max) * width)) : 0;
  return `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
}
