import { afterEach, describe, expect, it } from 'vitest';
import { nextEvent } from '../../src/events.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { runCancel } from '../../src/orchestrator/cancel.js';
import type { ReplicaPlan, ServerHandle } from '../../src/server.js';
import type { LaunchReport } from '../../src/triggers/launch.js';
import { launchReconcile, oneShotAdd, templatePut, triggerShow } from '../../src/ops/domain/trigger-definitions.js';
import { truncateLive, useTestDatabase, waitFor } from '../support/db.js';
import { startTestServer } from '../support/server.js';

const TEMPLATE = (name: string) => `name: ${name}\nsteps:\n  hello:\n    run: echo hello\n`;

describe('the launch loop in a replica', () => {
  const db = useTestDatabase();
  let servers: ServerHandle[] = [];
  afterEach(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    servers = [];
    await truncateLive(db.current.pool, 'replicas, coordination_leases, run_templates, schedules, one_shots, trigger_ticks, runs CASCADE');
  });

  it('only the leader runs it; a one-shot written through a non-leader replica fires within the probe interval', async () => {
    const plan = (): ReplicaPlan => ({ coordination: { timing: { tickMs: 200 }, hooks: orchestratorHooks }, launch: {} });
    const a = await startTestServer(db.current.url, { plan: plan() });
    servers.push(a);
    await waitFor(() => a.replica.ownership.isLeader(), { what: 'a leads' });
    const b = await startTestServer(db.current.url, { plan: plan() });
    servers.push(b);
    const sleeps: number[] = [];
    const passesOnB: LaunchReport[] = [];
    a.replica.events.on('launch:pass', (r: LaunchReport) => sleeps.push(r.sleepMs));
    b.replica.events.on('launch:pass', (r: LaunchReport) => passesOnB.push(r));
    await nextEvent(b.replica.events, 'coordination:tick', (t) => !t.leader);

    await templatePut(b.replica.pool, { text: TEMPLATE('t'), actor: 'test' });
    const shot = await oneShotAdd(b.replica.pool, { template: 't', at: 'now', actor: 'test' });
    const fired = await waitFor(async () => (await triggerShow(b.replica.pool, { id: shot.id })).ticks.find((t) => t.outcome === 'fired'), { timeoutMs: 15_000, what: 'the one-shot fired' });
    const { rows } = await db.current.pool.query(`SELECT extract(epoch FROM (t.fired_at - o.created_at)) * 1000 AS ms FROM trigger_ticks t JOIN one_shots o ON o.id = t.trigger_id WHERE t.id = $1`, [fired!.id]);
    // The loop never sleeps longer than the 2 s probe interval, and the NOTIFY usually wakes it at once;
    // the wall-clock bound is generous for a loaded machine.
    expect(sleeps.every((s) => s <= 2_000)).toBe(true);
    expect(Number(rows[0].ms)).toBeLessThan(10_000);
    expect(passesOnB).toEqual([]);
  });

  it('a finishing run of a capped template re-drives its held launch at once; reconcile releases held rows', async () => {
    const server = await startTestServer(db.current.url, { plan: { launch: {} } });
    servers.push(server);
    const pool = server.replica.pool;
    await templatePut(pool, { text: TEMPLATE('capped'), maxConcurrentRuns: 1, actor: 'test' });
    const first = await oneShotAdd(pool, { template: 'capped', at: 'now', actor: 'test' });
    const second = await oneShotAdd(pool, { template: 'capped', at: 'now', actor: 'test' });
    const runOf = async (id: number) => (await triggerShow(pool, { id })).ticks[0];
    const firstTick = await waitFor(async () => (await runOf(first.id))?.runId ? runOf(first.id) : undefined, { what: 'first fired' });
    await waitFor(async () => (await runOf(second.id))?.deferredReason, { what: 'second deferred' });

    // With a 5 min discovery interval, only the finish's NOTIFY can fire it within the bound.
    await runCancel(pool, firstTick!.runId!, { actor: 'test' });
    const secondTick = await waitFor(async () => ((await runOf(second.id))?.outcome === 'fired' ? runOf(second.id) : undefined), { timeoutMs: 15_000, what: 'second fired' });
    expect(secondTick!.deferredReason).toMatch(/max_concurrent_runs 1 reached/);

    // A third waits behind the second; reconcile releases it and it is checked again at once (still capped).
    const third = await oneShotAdd(pool, { template: 'capped', at: 'now', actor: 'test' });
    await waitFor(async () => (await runOf(third.id))?.deferredReason, { what: 'third deferred' });
    const rechecked = new Promise<LaunchReport>((resolve) => server.replica.events.on('launch:pass', (r: LaunchReport) => r.deferred.length > 0 && resolve(r)));
    await launchReconcile(pool, { actor: 'test' });
    expect((await rechecked).deferred.map((d) => d.reason)).toEqual(['max_concurrent_runs 1 reached (1 running)']);
  });
});
