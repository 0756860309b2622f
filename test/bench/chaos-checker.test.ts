import { describe, expect, it } from 'vitest';
import { check, parseHistory, parseSideEffects, percentile, type CheckInput, type HistoryRecord } from '../../bench/chaos/checker.js';

const rec = (p: Partial<HistoryRecord> & Pick<HistoryRecord, 'ev' | 'at'>): HistoryRecord => ({ runner: 'r1', step_id: 1, run_id: 7, step: 's0', attempt: 1, token: '10', ...p });
const clean = (): CheckInput => ({
  histories: [rec({ ev: 'start', at: 100 }), rec({ ev: 'finish', at: 200, outcome: 'completed', exit_code: 0 })],
  sideEffects: [{ runId: 7, step: 's0', attempt: 1, pid: 42 }],
  steps: [{ stepId: 1, runId: 7, name: 's0', status: 'succeeded', attempt: 1 }],
  invariants: [{ name: 'x', rule: 'r', violations: 0, sample: [] }],
  reofferMs: [],
  expectFencing: false,
});

describe('the chaos history checker', () => {
  it('passes a clean history and counts what it saw', () => {
    const r = check(clean());
    expect(r.violations).toEqual([]);
    expect(r).toMatchObject({ steps: 1, succeeded: 1, executions: 1, completions: 1, fencedStaleWrites: 0 });
  });

  it('finds a lost step, a duplicated completion, a double execution and a missing effect', () => {
    const input = clean();
    input.steps.push({ stepId: 2, runId: 7, name: 's1', status: 'system_error', attempt: 1 });
    input.histories.push(rec({ ev: 'finish', runner: 'r2', token: '11', at: 300, outcome: 'completed', exit_code: 0 }));
    input.sideEffects.push({ runId: 7, step: 's0', attempt: 1, pid: 43 });
    input.histories.push(rec({ ev: 'start', step_id: 3, step: 's2', token: '12', at: 10 }), rec({ ev: 'finish', step_id: 3, step: 's2', token: '12', at: 20, outcome: 'completed', exit_code: 0 }));
    const r = check(input);
    expect(r.lost).toEqual(['run 7 step s1 (step 2): system_error at attempt 1']);
    expect(r.duplicatedCompletions).toEqual(['run 7 step s0 attempt 1: completed 2 times']);
    expect(r.doubleExecutions).toEqual(['run 7 step s0 attempt 1: ran 2 times']);
    expect(r.missingEffects).toEqual(['run 7 step s2 attempt 1: completed on r1 without its side effect']);
    expect(r.violations).toHaveLength(4);
  });

  it('finds a later attempt started while an earlier one still held its lease, and counts fenced writes', () => {
    const input = clean();
    // Attempt 2 starts at 150, inside attempt 1's [100, 200] which completed: two live leases at once.
    input.histories.push(rec({ ev: 'start', runner: 'r2', attempt: 2, token: '20', at: 150 }), rec({ ev: 'finish', runner: 'r2', attempt: 2, token: '20', at: 400, outcome: 'lost' }));
    const r = check({ ...input, expectFencing: true });
    expect(r.overlappingLeases).toHaveLength(1);
    expect(r.overlappingLeases[0]).toMatch(/attempt 2 started on r2 while attempt 1 on r1 still held its lease/);
    expect(r.fencedStaleWrites).toBe(1);
    // After the first attempt's completion, a new attempt is no overlap.
    input.histories.splice(2, 1, rec({ ev: 'start', runner: 'r2', attempt: 2, token: '20', at: 250 }));
    expect(check(input).overlappingLeases).toEqual([]);
  });

  it('fails when the fence was never exercised, or an invariant broke', () => {
    expect(check({ ...clean(), expectFencing: true }).violations).toEqual([expect.stringMatching(/^no stale write was fenced/)]);
    const broken = { ...clean(), invariants: [{ name: 'run_counter_matches', rule: 'counts', violations: 2, sample: [{ id: 1 }] }] };
    expect(check(broken).violations).toEqual([expect.stringMatching(/^invariant run_counter_matches \(counts\): 2 row\(s\)/)]);
  });

  it('parses histories and side effects, skipping a torn last line; percentiles by nearest rank', () => {
    const text = `${JSON.stringify(rec({ ev: 'start', at: 1 }))}\n{"ev":"fin`;
    expect(parseHistory(text)).toHaveLength(1);
    expect(parseSideEffects('7 s0 1 42\ngarbage\n8 build 2 43\n')).toEqual([{ runId: 7, step: 's0', attempt: 1, pid: 42 }, { runId: 8, step: 'build', attempt: 2, pid: 43 }]);
    expect(percentile([5, 1, 3, 2, 4], 99)).toBe(5);
    expect(percentile([5, 1, 3, 2, 4], 50)).toBe(3);
    expect(percentile([], 99)).toBeNull();
  });
});
