import { describe, expect, it } from 'vitest';
import { ArgsError, parseArgs, SCENARIOS, sizesFor } from '../../bench/args.js';
import { figure, figureJson, markdownTable, median, percentile, perSecond, ratioOf, repeatedJson, repeatedTable, round, summariseRounds } from '../../bench/stats.js';

describe('bench statistics', () => {
  it('takes nearest-rank percentiles of unsorted samples', () => {
    const samples = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    expect(percentile(samples, 50)).toBe(5);
    expect(percentile(samples, 99)).toBe(10);
    expect(percentile(samples, 100)).toBe(10);
    expect(percentile(samples, 0)).toBe(1);
    expect(percentile([42], 99)).toBe(42);
    expect(percentile([], 50)).toBeNaN();
    expect(samples).toEqual([5, 1, 4, 2, 3, 10, 9, 8, 7, 6]); // input untouched
  });

  it('p99 of 200 samples is the 198th smallest', () => {
    const samples = Array.from({ length: 200 }, (_, i) => 200 - i);
    expect(percentile(samples, 99)).toBe(198);
    expect(percentile(samples, 50)).toBe(100);
  });

  it('computes ratios only against a usable baseline', () => {
    expect(ratioOf(50, 100)).toBe(0.5);
    expect(ratioOf(50, 0)).toBeNull();
    expect(ratioOf(50, null)).toBeNull();
    expect(ratioOf(NaN, 2)).toBeNull();
    expect(perSecond(2_000, 500)).toBe(4_000);
    expect(perSecond(1, 0)).toBeNaN();
  });

  it('prints one JSON line per figure with the documented keys', () => {
    const f = figure({ scenario: 'throughput', metric: 'steps/s', value: 1234.5678, unit: 'steps/s', baseline: 2469.1356, better: 'higher', target: '≥ 1.0× graphile-worker', met: false });
    const parsed = JSON.parse(figureJson(f));
    expect(Object.keys(parsed).slice(0, 6)).toEqual(['scenario', 'metric', 'value', 'unit', 'baseline', 'ratio']);
    expect(parsed).toMatchObject({ scenario: 'throughput', metric: 'steps/s', value: 1235, unit: 'steps/s', baseline: 2469, ratio: 0.5, met: false });
    const bare = JSON.parse(figureJson(figure({ scenario: 'memory', metric: 'server RSS', value: 80.25, unit: 'MB', better: 'lower' })));
    expect(bare).toEqual({ scenario: 'memory', metric: 'server RSS', value: 80.25, unit: 'MB', baseline: null, ratio: null });
  });

  it('renders a markdown table with a row per figure', () => {
    const table = markdownTable([
      figure({ scenario: 'latency', metric: 'p99', value: 7.25, unit: 'ms', baseline: 9.5, better: 'lower', target: '≤ 10 ms', met: true }),
      figure({ scenario: 'memory', metric: 'server RSS', value: 120, unit: 'MB', better: 'lower' }),
    ]).split('\n');
    expect(table).toHaveLength(4);
    expect(table[0]).toBe('| scenario | metric | opschain | graphile-worker | ratio | target | met |');
    expect(table[2]).toBe('| latency | p99 | 7.25 ms | 9.5 ms | 0.763× | ≤ 10 ms | yes |');
    expect(table[3]).toBe('| memory | server RSS | 120 MB | — | — |  |  |');
  });

  it('rounds to significant digits but keeps large figures whole', () => {
    expect(round(0.0123456)).toBe(0.0123);
    expect(round(12345.6)).toBe(12346);
    expect(round(99.94)).toBe(99.9);
  });
});

describe('bench flags', () => {
  it('defaults to every scenario, full size', () => {
    const a = parseArgs([]);
    expect(a.scenarios).toEqual([...SCENARIOS]);
    expect(a.quick).toBe(false);
  });

  it('takes repeated and comma-listed scenarios in canonical order, once each', () => {
    const a = parseArgs(['--scenario', 'memory,latency', '--scenario=throughput', '--scenario', 'latency', '--quick', '--out', '/tmp/x.jsonl']);
    expect(a.scenarios).toEqual(['throughput', 'latency', 'memory']);
    expect(a.quick).toBe(true);
    expect(a.out).toBe('/tmp/x.jsonl');
  });

  it('refuses unknown scenarios, flags and URLs with one line', () => {
    expect(() => parseArgs(['--scenario', 'speed'])).toThrow(ArgsError);
    expect(() => parseArgs(['--fast'])).toThrow(/unknown argument '--fast'/);
    expect(() => parseArgs(['--database-url', 'mysql://x'])).toThrow(/postgres/);
    expect(() => parseArgs(['--out'])).toThrow(/needs a value/);
    expect(parseArgs(['--database-url', 'postgres://u@h:5432/db']).databaseUrl).toBe('postgres://u@h:5432/db');
    expect(parseArgs([]).repeat).toBe(1);
    expect(parseArgs(['--repeat', '3']).repeat).toBe(3);
    for (const bad of ['0', '10', '2.5', 'x']) expect(() => parseArgs(['--repeat', bad])).toThrow(/--repeat: expected an integer 1-9/);
  });

  it('sizes the fleet scenario: 10,000 runners, 500 with --quick, or --fleet-runners N', () => {
    expect(sizesFor(false).fleetRunners).toBe(10_000);
    expect(sizesFor(true).fleetRunners).toBe(500);
    expect(parseArgs(['--scenario', 'fleet', '--fleet-runners', '2000']).fleetRunners).toBe(2000);
    expect(parseArgs(['--scenario', 'fleet']).fleetRunners).toBeUndefined();
    for (const bad of ['0', '100001', '1.5', 'many']) expect(() => parseArgs(['--fleet-runners', bad])).toThrow(/--fleet-runners: expected an integer 1-100000/);
  });

  it('sums repeated rounds up: medians, each round\'s own ratio, its range, and the rounds that met the target', () => {
    const narrow = (value: number, baseline: number) => {
      const f = figure({ scenario: 'throughput', metric: 'steps/s', value, unit: 'steps/s', baseline, better: 'higher', target: '≥ 0.15× graphile-worker' });
      f.met = f.ratio! >= 0.15;
      return f;
    };
    const rss = (value: number) => figure({ scenario: 'memory', metric: 'server RSS', value, unit: 'MiB', better: 'lower' });
    const rounds = [[narrow(3_000, 20_000), rss(180)], [narrow(2_800, 16_000), rss(184)], [narrow(4_000, 25_000), rss(182)]];
    const [steps, memory] = summariseRounds(rounds);
    // Ratios 0.15, 0.175 and 0.16: the median of the rounds' ratios, not 3,000 / 20,000.
    expect(steps).toMatchObject({ scenario: 'throughput', rounds: 3, value: 3_000, baseline: 20_000, ratioMin: 0.15, ratioMax: 0.175, met: { yes: 3, of: 3 } });
    expect(steps.ratio).toBeCloseTo(0.16, 10);
    expect(memory).toMatchObject({ scenario: 'memory', value: 182, baseline: null, ratio: null, ratioMin: null });
    expect(memory.met).toBeUndefined();
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
    expect(JSON.parse(repeatedJson(steps))).toEqual({
      repeated: true, scenario: 'throughput', metric: 'steps/s', rounds: 3, value: 3_000, unit: 'steps/s', baseline: 20_000,
      ratio: 0.16, ratio_min: 0.15, ratio_max: 0.175, target: '≥ 0.15× graphile-worker', met: 3, judged: 3,
    });
    const table = repeatedTable([steps, memory]).split('\n');
    expect(table[2]).toBe('| throughput | steps/s | 3,000 steps/s | 20,000 steps/s | 0.16× | 0.15×–0.175× | ≥ 0.15× graphile-worker | 3 of 3 |');
    expect(table[3]).toBe('| memory | server RSS | 182 MiB | — | — | — |  |  |');
    expect(JSON.parse(figureJson(rounds[1][0], 2))).toMatchObject({ round: 2, scenario: 'throughput', value: 2_800 });
  });

  it('quick sizes are smaller than the full ones in every dimension', () => {
    const q = sizesFor(true);
    const f = sizesFor(false);
    expect(f.throughputSteps).toBe(20_000);
    expect(f.depths).toEqual([10_000, 100_000, 1_000_000]);
    expect(f.memoryEntries).toBe(1_000_000);
    expect(f.memoryRunners).toBe(1_000);
    expect(f.latencyRuns).toBe(200);
    expect(q.throughputSteps).toBeLessThan(f.throughputSteps);
    expect(Math.max(...q.depths)).toBeLessThan(Math.max(...f.depths));
    expect(q.memoryEntries).toBeLessThan(f.memoryEntries);
    for (const s of [q, f]) {
      expect(s.throughputSteps % s.stepsPerRun).toBe(0);
      expect(s.baselineConcurrency).toBe(24);
      expect(s.baselineLocalQueue).toBe(500);
    }
  });
});
