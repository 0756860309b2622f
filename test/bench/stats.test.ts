import { describe, expect, it } from 'vitest';
import { ArgsError, parseArgs, SCENARIOS, sizesFor } from '../../bench/args.js';
import { figure, figureJson, markdownTable, percentile, perSecond, ratioOf, round } from '../../bench/stats.js';

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
