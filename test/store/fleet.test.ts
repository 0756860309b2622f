import { describe, expect, it } from 'vitest';
import { fleetDrainSet, fleetDrainState, fleetQueueRead, fleetRead } from '../../src/store/fleet.js';
import { groupList, groupSet } from '../../src/store/groups.js';
import { leasesOutstandingByRun } from '../../src/store/leases.js';
import { placementBind, placementList, placementUnbind } from '../../src/store/placement.js';
import { projectList, projectSet } from '../../src/store/projects.js';
import { queueEnqueue } from '../../src/store/queue.js';
import { buildFleetQueue } from '../../src/views/fleet-queue.js';
import { useTestDatabase } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';

describe('fleet store', () => {
  const db = useTestDatabase();

  it('reads runners with group facts, drains and running load in one pass', async () => {
    const pool = db.current.pool;
    await groupSet(pool, { name: 'prod', attributes: { location: 'dc1', tier: 'gold' }, exclusive: true });
    await groupSet(pool, { name: 'prod', attributes: { tier: null } });
    await insertRunner(pool, { id: 'r-a', name: 'alpha', group: 'prod', labels: ['linux'], maxLoad: 8 });
    await insertRunner(pool, { id: 'r-b', name: 'beta', maxLoad: 2, state: 'offline' });
    await insertLease(pool, { stepId: 1, runId: 1, runnerId: 'r-a', load: 1.5 });
    await insertLease(pool, { stepId: 2, runId: 1, runnerId: 'r-a', load: 2 });
    await insertLease(pool, { stepId: 3, runId: 2, runnerId: null, load: 5 });
    const fleet = await fleetRead(pool);
    expect(fleet.map((r) => [r.runnerName, r.group, r.groupAttributes, r.exclusive, r.runningLoad, r.leases, r.online])).toEqual([
      ['alpha', 'prod', { location: 'dc1' }, true, 3.5, 2, true],
      ['beta', null, {}, false, 0, 0, false],
    ]);
    expect(await leasesOutstandingByRun(pool, [1, 2])).toEqual(new Map([[1, 2], [2, 1]]));
  });

  it('drains and undrains runners (by id or name) and groups idempotently, audited', async () => {
    const pool = db.current.pool;
    const d1 = await fleetDrainSet(pool, { runner: 'alpha', drained: true, reason: 'kernel', actor: 'test' });
    expect(d1).toEqual({ kind: 'runner', targets: ['r-a'], names: ['alpha'], drained: true, changed: true });
    expect((await fleetDrainSet(pool, { runner: 'r-a', drained: true, actor: 'test' })).changed).toBe(false);
    expect((await fleetRead(pool))[0]).toMatchObject({ drained: true, runnerDrained: true, drainReason: 'kernel' });
    await expect(fleetDrainSet(pool, { group: 'edge', drained: true, actor: 'test' })).rejects.toThrow(/no runner group named edge/);
    await groupSet(pool, { name: 'edge' });
    const g = await fleetDrainSet(pool, { group: 'edge', drained: true, reason: 'moving racks', actor: 'test' });
    expect(g).toEqual({ kind: 'group', targets: ['edge'], drained: true, changed: true });
    expect((await fleetDrainSet(pool, { group: 'edge', drained: true, actor: 'test' })).changed).toBe(false);
    expect(await fleetDrainState(pool)).toEqual({ runners: new Set(['r-a']), groups: new Set(['edge']) });
    expect((await fleetDrainSet(pool, { group: 'edge', drained: false, actor: 'test' })).changed).toBe(true);
    expect((await fleetDrainSet(pool, { runner: 'alpha', drained: false, actor: 'test' })).changed).toBe(true);
    expect(await fleetDrainState(pool)).toEqual({ runners: new Set(), groups: new Set() });
    await expect(fleetDrainSet(pool, { runner: 'nobody', drained: true, actor: 'test' })).rejects.toThrow(/no runner with id or name nobody/);
    const { rows } = await pool.query(`SELECT action, target, detail FROM audit_log WHERE action LIKE 'fleet.%' ORDER BY id`);
    expect(rows.map((r) => [r.action, r.target, r.detail.changed])).toEqual([
      ['fleet.drain', 'runner:r-a', true],
      ['fleet.drain', 'runner:r-a', false],
      ['fleet.drain', 'group:edge', true],
      ['fleet.drain', 'group:edge', false],
      ['fleet.undrain', 'group:edge', true],
      ['fleet.undrain', 'runner:r-a', true],
    ]);
    expect((await groupList(pool)).map((x) => [x.name, x.drained, x.runners])).toEqual([
      ['edge', false, 0],
      ['prod', false, 1],
    ]);
  });

  it('keeps project weights and path bindings', async () => {
    const pool = db.current.pool;
    await projectSet(pool, { name: 'acme', weight: 2 });
    await projectSet(pool, { name: 'acme', weight: 3 });
    await projectSet(pool, { name: 'beta', weight: 0.5 });
    expect(await projectList(pool)).toEqual([
      { name: 'acme', weight: 3 },
      { name: 'beta', weight: 0.5 },
    ]);
    await placementBind(pool, { path: 'acme/prod', requirement: { group: 'prod' } });
    await placementBind(pool, { path: 'acme/prod', requirement: { group: ['prod', 'dr'], labels: ['linux'] } });
    expect((await placementList(pool)).map((b) => [b.path, b.requirement])).toEqual([['acme/prod', { group: ['prod', 'dr'], labels: ['linux'] }]]);
    expect(await placementUnbind(pool, { path: 'acme/prod' })).toBe(true);
    expect(await placementUnbind(pool, { path: 'acme/prod' })).toBe(false);
  });

  it('reads the fleet queue with a verdict per ready entry and the holder of each lease', async () => {
    const pool = db.current.pool;
    const base = { attempt: 1, priority: 0, lane: 2 as const, fairKey: 'acme', weight: 1, pools: [], load: 1, runScope: false, maxParallel: 1, siteStamp: null };
    await queueEnqueue(pool, [
      { ...base, stepId: 100, runId: 10, requirement: { group: 'prod' } },
      { ...base, stepId: 101, runId: 10, requirement: { labels: ['gpu'] } },
    ]);
    const view = buildFleetQueue(await fleetQueueRead(pool), { acceptExceeding: true });
    const byStep = new Map(view.entries.map((e) => [e.stepId, e]));
    expect(byStep.get(100)!.verdict).toEqual({ code: 'waiting_for_tick', reason: 'waiting for a dispatch tick', satisfiable: true, runner: null });
    expect(byStep.get(101)!.verdict).toMatchObject({ code: 'no_runner_matches', reason: 'no runner matches: closest beta (no label gpu)', satisfiable: false });
    expect(byStep.get(1)!).toMatchObject({ state: 'leased', verdict: { code: 'leased', reason: 'leased to alpha (offered)' }, lease: { runnerName: 'alpha' } });
    expect(byStep.get(3)!.verdict.code).toBe('claimed');
    expect(view.summary).toMatchObject({ ready: 2, readyShown: 2, leased: 3, unsatisfiable: 1 });
  });
});
