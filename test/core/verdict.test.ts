import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isDrained, placementGaps, placementMatches } from '../../src/core/placement.js';
import { planDelivery } from '../../src/core/plan.js';
import { verdict, type Postures, type VerdictRunner } from '../../src/core/verdict.js';
import { entry, fleetArb, requirementArb, waiter } from './arbitraries.js';

const open: Postures = { halted: false, fleetQuiesced: false, acceptExceeding: true };
const runner = (p: Partial<VerdictRunner> & { runnerId: string }): VerdictRunner => ({ runnerName: p.runnerId, group: null, labels: [], executors: ['shell'], groupAttributes: {}, exclusive: false, maxLoad: 4, runningLoad: 0, ...p });

describe('verdict', () => {
  it('agrees with the matcher on random fleets', () => {
    fc.assert(
      fc.property(fleetArb, requirementArb, fc.constantFrom(0.5, 1, 3, 10), (runners, requirement, load) => {
        const e = entry({ requirement, load });
        const v = verdict(e, { runners }, open, new Map(), new Map());
        const matching = runners.filter((r) => placementMatches(requirement, r));
        expect(v.code === 'no_runner_matches').toBe(matching.length === 0);
        if (v.code === 'no_runner_matches' && runners.length) {
          // The closest runner named lacks exactly what the matcher says it lacks.
          const named = runners.find((r) => r.runnerName === v.runner)!;
          expect(v.reason).toBe(`no runner matches: closest ${named.runnerName} (${placementGaps(requirement, named).join(', ')})`);
          for (const r of runners) expect(placementGaps(requirement, r).length).toBeGreaterThanOrEqual(placementGaps(requirement, named).length);
        }
        expect(v.code === 'all_matches_drained').toBe(matching.length > 0 && matching.every((r) => isDrained(r)));
      }),
      { numRuns: 500 },
    );
  });

  it('says "waiting for a dispatch tick" exactly when a tick with every live runner parked would deliver it', () => {
    fc.assert(
      fc.property(fleetArb, requirementArb, fc.constantFrom(0.5, 1, 3, 10), fc.boolean(), (runners, requirement, load, acceptExceeding) => {
        const e = entry({ requirement, load });
        const v = verdict(e, { runners }, { ...open, acceptExceeding }, new Map(), new Map());
        const live = runners.filter((r) => r.online !== false);
        const out = planDelivery({
          claims: [e],
          waiters: live.map((r) => waiter({ ...r, slots: 1 })),
          fleet: live,
          pools: new Map(),
          pins: new Map(),
          outstandingByRun: new Map(),
          acceptExceeding,
        });
        expect(v.code === 'waiting_for_tick').toBe(out.deliveries.length === 1);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with a plan for pinned runs and pools too', () => {
    fc.assert(
      fc.property(fleetArb, fc.option(fc.constantFrom('r0', 'r1', 'gone'), { nil: undefined }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 3 }), fc.subarray(['r0', 'r1', 'r2']), (runners, pin, out, cap, held, elsewhere) => {
        const e = entry({ runScope: true, maxParallel: cap, pools: ['db'] });
        const pins = new Map(pin ? [[e.runId, pin]] : []);
        const outstanding = new Map(pin ? [[e.runId, out]] : []);
        const pools = new Map([['db', { limit: 2, held }]]);
        // Some runners are busy with another run-scoped run.
        const runnerRuns = new Map(elsewhere.map((id) => [id, e.runId + 1_000_000]));
        const v = verdict(e, { runners, outstandingByRun: outstanding, runnerRuns }, open, pools, pins);
        const live = runners.filter((r) => r.online !== false);
        const plan = planDelivery({ claims: [e], waiters: live.map((r) => waiter({ ...r, slots: 1 })), fleet: live, pools, pins, outstandingByRun: outstanding, acceptExceeding: true, runnerRuns });
        expect(v.code === 'waiting_for_tick').toBe(plan.deliveries.length === 1);
        if (held >= 2) expect(v.reason).toBe(`pool full: db (${held}/2)`);
      }),
      { numRuns: 500 },
    );
  });

  it('checks the gates in the documented order', () => {
    const e = entry({ pools: ['db'], requirement: { labels: ['gpu'] } });
    const pools = new Map([['db', { limit: 3, held: 3 }]]);
    const runners = [runner({ runnerId: 'a' })];
    expect(verdict(e, { runners }, { ...open, halted: true, fleetQuiesced: true, reason: 'incident 42' }, pools, new Map()).reason).toBe('platform halted: incident 42');
    expect(verdict(e, { runners }, { ...open, fleetQuiesced: true }, pools, new Map()).reason).toBe('fleet quiesced');
    expect(verdict(e, { runners }, open, pools, new Map())).toMatchObject({ code: 'pool_full', reason: 'pool full: db (3/3)', satisfiable: true });
    expect(verdict(e, { runners }, open, new Map(), new Map())).toMatchObject({ code: 'no_runner_matches', reason: 'no runner matches: closest a (no label gpu)', satisfiable: false });
    expect(verdict(e, { runners: [] }, open, new Map(), new Map()).reason).toBe('no runner matches: no runners registered');
    const gpu = [runner({ runnerId: 'g1', labels: ['gpu'], drained: true }), runner({ runnerId: 'g2', labels: ['gpu'], group: 'ml' })];
    expect(verdict(e, { runners: gpu, drains: { runners: new Set(), groups: new Set(['ml']) } }, open, new Map(), new Map()).reason).toBe('every matching runner drained (g1, g2)');
    expect(verdict(e, { runners: [runner({ runnerId: 'g', labels: ['gpu'], online: false })] }, open, new Map(), new Map()).reason).toBe('every matching runner offline (g)');
    const busy = [runner({ runnerId: 'b1', labels: ['gpu'], maxLoad: 4, runningLoad: 3.5 }), runner({ runnerId: 'b2', labels: ['gpu'], maxLoad: 2, runningLoad: 1 })];
    expect(verdict(entry({ requirement: { labels: ['gpu'] }, load: 2 }), { runners: busy }, open, new Map(), new Map())).toMatchObject({
      code: 'all_matches_busy',
      reason: 'every matching runner busy by load: best b2 has 1 of 2 free, step needs 2',
      runner: 'b2',
    });
    const big = entry({ load: 16 });
    const fleet = [runner({ runnerId: 'm', maxLoad: 8, runningLoad: 1 }), runner({ runnerId: 's', maxLoad: 2 })];
    expect(verdict(big, { runners: fleet }, open, new Map(), new Map())).toMatchObject({ code: 'exceeds_max_load', reason: 'exceeds max load: step load 16 > largest max_load 8; waits for m to be idle', satisfiable: true });
    expect(verdict(big, { runners: fleet }, { ...open, acceptExceeding: false }, new Map(), new Map())).toMatchObject({
      code: 'exceeds_max_load',
      reason: 'exceeds max load: step load 16 > largest max_load 8 (m), accept_exceeding off',
      satisfiable: false,
    });
    const silent = [runner({ runnerId: 'q1', polling: false }), runner({ runnerId: 'q2', polling: false })];
    expect(verdict(entry({}), { runners: silent }, open, new Map(), new Map())).toMatchObject({
      code: 'no_runner_polling',
      reason: 'no runner polling: no matching runner has polled within the poll window (q1, q2)',
      satisfiable: true,
    });
    expect(verdict(entry({}), { runners: [...silent, runner({ runnerId: 'q3' })] }, open, new Map(), new Map()).code).toBe('waiting_for_tick');
    expect(verdict(entry({}), { runners: fleet }, open, new Map(), new Map())).toMatchObject({ code: 'waiting_for_tick', reason: 'waiting for a dispatch tick' });
  });

  it('says full, not waiting for a tick, when every matching runner is at its max parallel steps', () => {
    const full = [runner({ runnerId: 'p1', maxLoad: 2, runningLoad: 1, maxParallelSteps: 1, leases: 1 }), runner({ runnerId: 'p2', maxLoad: 4, runningLoad: 2, maxParallelSteps: 2, leases: 2 })];
    expect(verdict(entry({}), { runners: full }, open, new Map(), new Map())).toMatchObject({
      code: 'all_matches_busy',
      reason: 'every matching runner full: p1 at its max parallel steps (1/1)',
      satisfiable: true,
      runner: 'p1',
    });
    // One slot free anywhere: a tick delivers it.
    expect(verdict(entry({}), { runners: [...full, runner({ runnerId: 'p3', maxLoad: 2, runningLoad: 1, maxParallelSteps: 2, leases: 1 })] }, open, new Map(), new Map()).code).toBe('waiting_for_tick');
  });

  it('names the pinned runner when it is gone, busy or no longer a match', () => {
    const e = entry({ runScope: true, maxParallel: 2, requirement: { labels: ['linux'] } });
    const pins = new Map([[e.runId, 'p']]);
    const p = runner({ runnerId: 'p', runnerName: 'builder-1', labels: ['linux'] });
    expect(verdict(e, { runners: [] }, open, new Map(), pins)).toMatchObject({ code: 'pinned_runner_gone', reason: 'pinned runner p gone', satisfiable: false });
    expect(verdict(e, { runners: [{ ...p, online: false }] }, open, new Map(), pins).reason).toBe('pinned runner builder-1 gone');
    expect(verdict(e, { runners: [p], outstandingByRun: new Map([[e.runId, 2]]) }, open, new Map(), pins).reason).toBe('pinned runner builder-1 busy: run at max_parallel_steps (2/2)');
    expect(verdict(e, { runners: [{ ...p, runningLoad: 3.5 }] }, open, new Map(), pins).reason).toBe('pinned runner builder-1 busy: 0.5 of 4 free, step needs 1');
    expect(verdict(e, { runners: [{ ...p, drained: true }] }, open, new Map(), pins).reason).toBe('pinned runner builder-1 busy: drained');
    expect(verdict(e, { runners: [{ ...p, labels: [] }] }, open, new Map(), pins).reason).toBe('pinned runner builder-1 does not match: no label linux');
    expect(verdict(e, { runners: [p, runner({ runnerId: 'other', labels: ['linux'] })] }, open, new Map(), pins).code).toBe('waiting_for_tick');
    expect(verdict(e, { runners: [p], runnerRuns: new Map([['p', 77]]) }, open, new Map(), pins).reason).toBe('pinned runner builder-1 busy: running run 77');
    const loose = entry({ requirement: { labels: ['linux'] } });
    expect(verdict(loose, { runners: [p], runnerRuns: new Map([['p', 77]]) }, open, new Map(), new Map()).reason).toBe('every matching runner busy: builder-1 is running run 77 (scope run)');
  });
});

describe('placement matching', () => {
  const r = runner({ runnerId: 'x', group: 'prod', labels: ['linux'], executors: ['shell', 'docker'], groupAttributes: { location: 'dc1' } });
  it('group equality or set membership', () => {
    expect(placementMatches({ group: 'prod' }, r)).toBe(true);
    expect(placementMatches({ group: ['build', 'prod'] }, r)).toBe(true);
    expect(placementGaps({ group: ['build', 'deploy'] }, r)).toEqual(['not in group build|deploy']);
  });
  it('every selector resolves to an in-set group attribute', () => {
    expect(placementMatches({ selectors: { location: ['dc1', 'dc2'] } }, r)).toBe(true);
    expect(placementGaps({ selectors: { location: ['dc2'] } }, r)).toEqual(['location not in dc2']);
    expect(placementGaps({ selectors: { tier: ['gold'] } }, r)).toEqual(['tier not in gold']);
  });
  it('every label and executor present', () => {
    expect(placementGaps({ labels: ['linux', 'gpu'], executors: ['docker', 'k8s'] }, r)).toEqual(['no label gpu', 'no executor k8s']);
  });
  it('an exclusive group only takes work naming it', () => {
    const x = { ...r, exclusive: true };
    expect(placementGaps(null, x)).toEqual(['exclusive group prod takes only work targeted at it']);
    expect(placementGaps({ labels: ['linux'] }, x)).toEqual(['exclusive group prod takes only work targeted at it']);
    expect(placementMatches({ group: 'prod' }, x)).toBe(true);
  });
  it('matches exactly when it finds no gap, whichever gap comes first', () => {
    fc.assert(
      fc.property(fleetArb, requirementArb, (runners, requirement) => {
        for (const x of runners) expect(placementMatches(requirement, x)).toBe(placementGaps(requirement, x).length === 0);
      }),
      { numRuns: 500 },
    );
  });
  it('a runner without a group matches only group-free requirements', () => {
    const bare = runner({ runnerId: 'b' });
    expect(placementMatches(null, bare)).toBe(true);
    expect(placementMatches({ group: 'prod' }, bare)).toBe(false);
    expect(placementMatches({ selectors: { location: ['dc1'] } }, bare)).toBe(false);
  });
});
