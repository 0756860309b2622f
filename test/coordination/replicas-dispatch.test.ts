import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { opsApi } from '../../src/api/ops-routes.js';
import { coordinationFeature } from '../../src/coordination/coordinator.js';
import { nextEvent } from '../../src/events.js';
import { shardOf } from '../../src/core/fnv.js';
import { shardsOf } from '../../src/core/rendezvous.js';
import { dispatchFeature } from '../../src/api/dispatch-feature.js';
import { expireOnce } from '../../src/dispatch/lifecycle.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerContext, ServerHandle } from '../../src/server.js';
import { replicaSetQuiesced } from '../../src/store/replicas.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { truncateLive, useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun } from '../support/seed.js';
import { startTestServer } from '../support/server.js';

// Production features with a short coordination tick, so in-process replicas converge quickly.
const features = () => [
  coordinationFeature({ timing: { tickMs: 100 }, hooks: orchestratorHooks, leaderPasses: [async (ctx: ServerContext) => ctx.dispatch && expireOnce(ctx.dispatch)] }),
  opsApi(),
  dispatchFeature({ hooks: orchestratorHooks, ownExpiryLoop: false }),
];

describe('replicas sharing one queue (in process)', () => {
  const db = useTestDatabase();
  let servers: ServerHandle[] = [];
  let registration: string;
  beforeAll(async () => {
    registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 't' })).secret;
  });
  afterEach(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    servers = [];
    await truncateLive(db.current.pool, 'replicas, coordination_leases, queue_ready, scheduler_job_leases');
  });

  async function fleet(sites: Array<string | undefined>): Promise<ServerHandle[]> {
    const started = await Promise.all(sites.map((site) => startTestServer(db.current.url, { config: { site }, features: features() })));
    servers.push(...started);
    const ids = started.map((s) => s.ctx.replicaId);
    // Settled: every replica has ticked with the whole fleet in view and holds exactly its rendezvous shards.
    await Promise.all(started.map((s) => nextEvent(s.ctx.events, 'coordination:tick', (t) => t.live.length === started.length)));
    await waitFor(() => started.every((s) => JSON.stringify(s.ctx.ownership.owned()) === JSON.stringify(shardsOf(s.ctx.replicaId, ids))), {
      what: 'the rendezvous assignment in place',
    });
    return started;
  }

  /** A run whose shard the given replica owns now. */
  async function runOn(owner: ServerHandle, steps = 1): Promise<{ runId: number; stepIds: number[] }> {
    for (;;) {
      const seeded = await seedRun(db.current.pool, { steps: Array.from({ length: steps }, (_, i) => ({ name: `s${i}` })) });
      if (owner.ctx.ownership.owned().includes(shardOf(seeded.runId))) return seeded;
      await db.current.pool.query(`DELETE FROM queue_ready WHERE run_id = $1`, [seeded.runId]);
    }
  }

  it('an entry whose owner has no runner waits; once aged past the fallback window a runner parked elsewhere gets it', async () => {
    const [a, b] = await fleet([undefined, undefined]);
    const runner = await new TestRunner(b.url).register(registration);
    const { stepIds } = await runOn(a);
    const fresh = await runner.acquire({ wait_ms: 1_000 });
    expect(fresh.status).toBe(204);
    // Time passes for the entry: it has now waited longer than the 15 s window.
    await db.current.pool.query(`UPDATE queue_ready SET ready_at = now() - interval '16 seconds' WHERE step_id = $1`, [stepIds[0]]);
    const aged = await runner.acquire({ wait_ms: 5_000 });
    expect(aged.status).toBe(200);
    expect(aged.body.offers.map((o: any) => o.step_id)).toEqual(stepIds);
    const { rows } = await db.current.pool.query(`SELECT holder FROM scheduler_job_leases WHERE step_id = $1`, [stepIds[0]]);
    expect(rows[0].holder).toBe(b.ctx.replicaId);
  });

  it('quiescing a replica answers its parked polls empty at once while it keeps serving', async () => {
    const [, b] = await fleet([undefined, undefined]);
    const runner = await new TestRunner(b.url).register(registration);
    const started = Date.now();
    const parked = runner.acquire({ wait_ms: 20_000 });
    await waitFor(() => b.ctx.dispatch!.registry.size === 1, { what: 'the poll parked' });
    const left = nextEvent(b.ctx.events, 'membership:changed');
    await replicaSetQuiesced(db.current.pool, { id: b.ctx.replicaId, quiesced: true });
    await left;
    expect((await parked).status).toBe(204);
    expect(Date.now() - started).toBeLessThan(10_000);
    // New polls on the quiesced replica are held and answered empty, never matched.
    await runOn(servers[0]);
    const again = await runner.acquire({ wait_ms: 500 });
    expect(again.status).toBe(204);
    expect((await fetch(`${b.url}/healthz`)).status).toBe(200);
    // Stopping a quiesced replica answers its held polls at once instead of waiting out their window.
    const registered = await new TestRunner(servers[0].url).register(registration);
    const other = Object.assign(new TestRunner(b.url), { credential: registered.credential, runnerId: registered.runnerId });
    const held = other.acquire({ wait_ms: 20_000 });
    // The poll is in its hold once b has recorded it as the runner's replica (written just before).
    await waitFor(async () => (await db.current.pool.query(`SELECT last_replica FROM runners WHERE id = $1`, [other.runnerId])).rows[0].last_replica === b.ctx.replicaId);
    const stopping = Date.now();
    await b.stop();
    servers = servers.filter((s) => s !== b);
    expect((await held).status).toBe(204);
    expect(Date.now() - stopping).toBeLessThan(5_000);
  }, 120_000);

  it('a site\'s stamped work falls back to another site the moment its last replica is quiesced', async () => {
    const [a, b, c] = await fleet(['dc1', 'dc2', 'dc1']);
    const runner = await new TestRunner(a.url).register(registration);
    // A dc2-stamped entry on a shard a third replica (dc1) owns: a's runner may not take it while dc2 is live.
    const { stepIds } = await runOn(c);
    await db.current.pool.query(`UPDATE queue_ready SET site_stamp = 'dc2' WHERE step_id = $1`, [stepIds[0]]);
    expect((await runner.acquire({ wait_ms: 800 })).status).toBe(204);
    await replicaSetQuiesced(db.current.pool, { id: b.ctx.replicaId, quiesced: true });
    await waitFor(() => !a.ctx.ownership.liveSites().has('dc2'), { what: 'dc2 out of the live sites' });
    const res = await runner.acquire({ wait_ms: 5_000 });
    expect(res.status).toBe(200);
    expect(res.body.offers.map((o: any) => o.step_id)).toEqual(stepIds);
    expect(c.ctx.ownership.owned()).toContain(shardOf((await db.current.pool.query(`SELECT run_id FROM steps WHERE id = $1`, [stepIds[0]])).rows[0].run_id));
  });

  it('a dead replica\'s un-acked offer comes back as a new attempt and the late ack is fenced', async () => {
    const [a, b] = await fleet([undefined, undefined]);
    const runner = await new TestRunner(a.url).register(registration);
    const { stepIds } = await runOn(a);
    const offered = await runner.acquire({ wait_ms: 5_000 });
    expect(offered.status).toBe(200);
    const offer = offered.body.offers[0];
    expect(offer.attempt).toBe(1);
    // The replica dies without a word: its heartbeat stops (written into the past) and its loops with it.
    await Promise.all(a.ctx.loops.map((l) => l.stop()));
    await db.current.pool.query(`UPDATE replicas SET heartbeat_at = now() - interval '20 seconds' WHERE id = $1`, [a.ctx.replicaId]);
    const tick = await nextEvent(b.ctx.events, 'coordination:tick', (t) => t.reclaimed.length > 0);
    expect(tick.reclaimed).toMatchObject([{ stepId: stepIds[0], exposed: true, attempt: 1, requeuedAttempt: 2 }]);
    const late = new TestRunner(b.url);
    late.credential = runner.credential;
    const ack = await late.call('ack', { leases: [{ step_id: offer.step_id, token: offer.token }] });
    expect(ack.body.results[0]).toMatchObject({ ok: false, status: 409, error: 'lease expired or revoked' });
    const { rows } = await db.current.pool.query(`SELECT attempt, status FROM steps WHERE id = $1`, [stepIds[0]]);
    expect(rows[0].attempt).toBe(2);
    const { rows: q } = await db.current.pool.query(`SELECT attempt FROM queue_ready WHERE step_id = $1`, [stepIds[0]]);
    expect(q[0].attempt).toBe(2);
  });
});
