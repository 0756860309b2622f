/** Pure helpers of the benchmark: percentiles, figures, ratios and the markdown table. */

/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN when there are none. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((Math.min(100, Math.max(0, p)) / 100) * sorted.length);
  return sorted[Math.max(0, rank - 1)];
}

/** Whether more of a metric is better (jobs/s) or worse (ms, bytes). */
export type Better = 'higher' | 'lower';

/** One measured figure; `baseline` is graphile-worker's value for the same metric in the same run. */
export interface Figure {
  scenario: string;
  metric: string;
  value: number;
  unit: string;
  baseline: number | null;
  /** value / baseline, so 1.2 on jobs/s is 20% faster and 1.2 on ms is 20% slower. */
  ratio: number | null;
  better: Better;
  /** What the issue asks of this figure, in words, and whether it was met (null: no target). */
  target?: string;
  met?: boolean | null;
  note?: string;
}

export function ratioOf(value: number, baseline: number | null | undefined): number | null {
  if (baseline === null || baseline === undefined || !Number.isFinite(baseline) || baseline === 0 || !Number.isFinite(value)) return null;
  return value / baseline;
}

export function figure(f: Omit<Figure, 'ratio' | 'baseline'> & { baseline?: number | null }): Figure {
  const baseline = f.baseline ?? null;
  return { ...f, baseline, ratio: ratioOf(f.value, baseline) };
}

/** Rounds to a few significant digits for display and JSON, keeping integers whole. */
export function round(v: number, digits = 3): number {
  if (!Number.isFinite(v)) return v;
  if (Math.abs(v) >= 10 ** digits) return Math.round(v);
  return Number(v.toPrecision(digits));
}

/** The JSON line the harness prints on stdout for one figure. */
export function figureJson(f: Figure): string {
  const out: Record<string, unknown> = {
    scenario: f.scenario,
    metric: f.metric,
    value: Number.isFinite(f.value) ? round(f.value, 4) : null,
    unit: f.unit,
    baseline: f.baseline === null ? null : round(f.baseline, 4),
    ratio: f.ratio === null ? null : round(f.ratio, 3),
  };
  if (f.target !== undefined) out.target = f.target;
  if (f.met !== undefined) out.met = f.met;
  if (f.note !== undefined) out.note = f.note;
  return JSON.stringify(out);
}

function cell(v: number | null, unit = ''): string {
  if (v === null || !Number.isFinite(v)) return '—';
  const r = round(v);
  return `${r.toLocaleString('en-US', { maximumFractionDigits: 3 })}${unit ? ` ${unit}` : ''}`;
}

/** The markdown table printed on stderr (and pasted into docs/performance.md). */
export function markdownTable(figures: readonly Figure[]): string {
  const head = ['scenario', 'metric', 'opschain', 'graphile-worker', 'ratio', 'target', 'met'];
  const rows = figures.map((f) => [
    f.scenario,
    f.metric,
    cell(f.value, f.unit),
    cell(f.baseline, f.unit),
    f.ratio === null ? '—' : `${round(f.ratio, 3)}×`,
    f.target ?? '',
    f.met === undefined || f.met === null ? '' : f.met ? 'yes' : 'no',
  ]);
  const lines = [head, head.map(() => '---'), ...rows].map((r) => `| ${r.join(' | ')} |`);
  return lines.join('\n');
}

/** Steps (or jobs) per second over an interval in milliseconds. */
export function perSecond(count: number, ms: number): number {
  return ms > 0 ? (count * 1000) / ms : NaN;
}
