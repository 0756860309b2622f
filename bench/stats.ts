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

/** The JSON line the harness prints on stdout for one figure (of round `ofRound` when the scenarios are repeated). */
export function figureJson(f: Figure, ofRound?: number): string {
  const out: Record<string, unknown> = {
    ...(ofRound !== undefined ? { round: ofRound } : {}),
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

/** One figure over repeated rounds of the same scenarios: medians, the ratio's range, how often its target was met. */
export interface RepeatedFigure {
  scenario: string;
  metric: string;
  unit: string;
  rounds: number;
  value: number;
  baseline: number | null;
  ratio: number | null;
  ratioMin: number | null;
  ratioMax: number | null;
  target?: string;
  /** Rounds whose figure met its target (of those that judged it). */
  met?: { yes: number; of: number };
}

export function median(values: readonly number[]): number {
  const s = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * The same figures of several rounds side by side, in the first round's order: on a shared
 * machine one run can land either side of a target, so a target is judged by how many rounds
 * met it. The median ratio is the median of each round's own ratio (opschain against
 * graphile-worker measured in that round), not a ratio of medians.
 */
export function summariseRounds(rounds: readonly (readonly Figure[])[]): RepeatedFigure[] {
  const key = (f: Figure) => `${f.scenario}\u0000${f.metric}`;
  const groups = new Map<string, Figure[]>();
  for (const figures of rounds) for (const f of figures) groups.set(key(f), [...(groups.get(key(f)) ?? []), f]);
  return [...groups.values()].map((fs) => {
    const ratios = fs.map((f) => f.ratio).filter((r): r is number => r !== null);
    const baselines = fs.map((f) => f.baseline).filter((b): b is number => b !== null);
    const judged = fs.filter((f) => f.met === true || f.met === false);
    const out: RepeatedFigure = {
      scenario: fs[0].scenario,
      metric: fs[0].metric,
      unit: fs[0].unit,
      rounds: fs.length,
      value: median(fs.map((f) => f.value)),
      baseline: baselines.length ? median(baselines) : null,
      ratio: ratios.length ? median(ratios) : null,
      ratioMin: ratios.length ? Math.min(...ratios) : null,
      ratioMax: ratios.length ? Math.max(...ratios) : null,
    };
    if (fs[0].target !== undefined) out.target = fs[0].target;
    if (judged.length > 0) out.met = { yes: judged.filter((f) => f.met).length, of: judged.length };
    return out;
  });
}

/** The JSON line of a repeated figure (`"repeated": true` tells it from a round's own figure). */
export function repeatedJson(f: RepeatedFigure): string {
  const r = (v: number | null) => (v === null || !Number.isFinite(v) ? null : round(v, 4));
  return JSON.stringify({
    repeated: true, scenario: f.scenario, metric: f.metric, rounds: f.rounds, value: r(f.value), unit: f.unit, baseline: r(f.baseline),
    ratio: r(f.ratio), ratio_min: r(f.ratioMin), ratio_max: r(f.ratioMax),
    ...(f.target !== undefined ? { target: f.target } : {}),
    ...(f.met ? { met: f.met.yes, judged: f.met.of } : {}),
  });
}

/** The table of repeated figures: medians, the ratio's range over the rounds, and the rounds that met each target. */
export function repeatedTable(figures: readonly RepeatedFigure[]): string {
  const x = (v: number | null) => (v === null || !Number.isFinite(v) ? '—' : `${round(v, 3)}×`);
  const head = ['scenario', 'metric', 'opschain (median)', 'graphile-worker (median)', 'ratio (median)', 'ratio range', 'target', 'met'];
  const rows = figures.map((f) => [
    f.scenario,
    f.metric,
    cell(f.value, f.unit),
    cell(f.baseline, f.unit),
    x(f.ratio),
    f.ratioMin === null ? '—' : `${x(f.ratioMin)}–${x(f.ratioMax)}`,
    f.target ?? '',
    f.met ? `${f.met.yes} of ${f.met.of}` : '',
  ]);
  return [head, head.map(() => '---'), ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}
