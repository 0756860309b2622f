/**
 * Typed cells: what a table, the NDJSON stream and the dashboard's panes share. A cell carries a
 * value, its unit and a tone (what the value means for the operator); renderers decide glyphs and
 * colours, so nothing here is coloured or decorated.
 */

/** What a value means: ok (healthy), warn (attention), bad (act now), muted (idle/absent), accent (identity). */
export type Tone = 'normal' | 'ok' | 'warn' | 'bad' | 'muted' | 'accent';

export type Unit = 'text' | 'count' | 'age' | 'duration' | 'load' | 'time' | 'flag';

export interface Cell {
  value: string | number | boolean | null;
  unit: Unit;
  tone: Tone;
  /** The value is an estimate (a planner statistic, a bounded sample). */
  estimate?: boolean;
}

export const text = (value: string | null, tone: Tone = 'normal'): Cell => ({ value, unit: 'text', tone });
export const count = (value: number, tone: Tone = 'normal', estimate = false): Cell => ({ value, unit: 'count', tone, ...(estimate ? { estimate } : {}) });
export const age = (ms: number | null, tone: Tone = 'normal'): Cell => ({ value: ms, unit: 'age', tone });
export const duration = (ms: number | null, tone: Tone = 'normal'): Cell => ({ value: ms, unit: 'duration', tone });
export const flag = (value: boolean, tone: Tone = 'normal'): Cell => ({ value, unit: 'flag', tone });

/** A table: column heads and rows of cells, for cli-table3 and for the dashboard's panes. */
export interface CellTable {
  head: string[];
  rows: Cell[][];
}

/** Compact human duration: 0.4s, 45s, 3m12s, 2h05m, 3d04h. */
export function durationText(ms: number): string {
  const neg = ms < 0;
  const a = Math.abs(ms);
  const s = a / 1000;
  let out: string;
  if (s < 10) out = `${s.toFixed(1)}s`;
  else if (s < 60) out = `${Math.floor(s)}s`;
  else if (s < 3600) out = `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  else if (s < 86_400) out = `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  else out = `${Math.floor(s / 86_400)}d${String(Math.floor((s % 86_400) / 3600)).padStart(2, '0')}h`;
  return neg ? `-${out}` : out;
}

/** 1234 → 1,234; 1234567 → 1.23M once it no longer fits a narrow column. */
export function countText(n: number, compact = false): string {
  if (compact && n >= 1_000_000) return `${(n / 1_000_000).toFixed(n >= 10_000_000 ? 1 : 2)}M`;
  if (compact && n >= 100_000) return `${Math.round(n / 1000)}k`;
  return n.toLocaleString('en-US');
}

/** The plain text of a cell: the same in a table, a pane or a log line. An estimate reads "~". */
export function cellText(c: Cell, opts: { compact?: boolean } = {}): string {
  if (c.value === null) return c.unit === 'text' ? '' : '-';
  switch (c.unit) {
    case 'count':
      return `${c.estimate ? '~' : ''}${countText(Number(c.value), opts.compact)}`;
    case 'age':
    case 'duration':
      return `${c.estimate ? '~' : ''}${durationText(Number(c.value))}`;
    case 'load':
      return String(Math.round(Number(c.value) * 100) / 100);
    case 'flag':
      return c.value ? 'yes' : 'no';
    default:
      return String(c.value);
  }
}
