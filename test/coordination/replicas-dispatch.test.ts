import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TickResult } from '../../src/dispatch/dispatcher.js';
import { nextEvent } from '../../src/events.js';
import { shardOf } from '../../src/core/fnv.js';
import { shardsOf } from '../../src/core/rendezvous.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ReplicaPlan, ServerHandle } from '../../src/server.js';
import { replicaSetQuiesced } from '../../src/store/replicas.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { truncateLive, useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun } from '../support/seed.js';
import { leaderDuties } from '../../src/features.js';
import { startTestServer } from '../support/server.js';

// Production features with a short coordination tick, so in-process replicas converge quickly.
const plan = (timing: { stalenessMs?: number } = {}): ReplicaPlan => ({
  coordination: { timing: { tickMs: 100, ...timing }, hooks: orchestratorHooks, leaderDuties: [leaderDuties.expirySweep] },
  ops: true,
  dispatch: { hooks: orchestratorHooks, ownExpiryLoop: false },
});

const HOUR_MS = 3_600_000;

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
    await truncateLive(db.current.pool, 'replicas, coordination_leases, queue_ready, step_leases');
  });

  async function fleet(sites: Array<string | undefined>, config: { pollWindowMs?: number } = {}, timing: { stalenessMs?: number } = {}): Promise<ServerHandle[]> {
    const started = await Promise.all(sites.map((site) => startTestServer(db.current.url, { config: { site, ...config }, plan: plan(timing) })));
    servers.push(...started);
    const ids = started.map((s) => s.replica.replicaId);
    // Settled: every replica has ticked with the whole fleet in view and holds exactly its rendezvous shards.
    await Promise.all(started.map((s) => nextEvent(s.replica.events, 'coordination:tick', (t) => t.live.length === started.length)));
    await waitFor(() => started.every((s) => JSON.stringify(s.replica.ownership.owned()) === JSON.stringify(shardsOf(s.replica.replicaId, ids))), {
      what: 'the rendezvous assignment in place',
    });
    return started;
  }

  /** A run whose shard the given replica owns now. */
  async function runOn(owner: ServerHandle, steps = 1): Promise<{ runId: number; stepIds: number[] }> {
    for (;;) {
      const seeded = await seedRun(db.current.pool, { steps: Array.from({ length: steps }, (_, i) => ({ name: `s${i}` })) });
      if (owner.replica.ownership.owned().includes(shardOf(seeded.runId))) return seeded;
      await db.current.pool.query(`DELETE FROM queue_ready WHERE run_id = $1`, [seeded.runId]);
    }
  }

  /**
   * A dispatch tick of `server` that began after this call, with a parked call in hand: the first
   * such tick may have begun before the caller's change, the second began after the first ended.
   * Each is asked for at once (the queue is told it changed, so the pass does not skip its tick as
   * nothing-new) rather than waited for at the idle cadence.
   */
  async function tickWithParkedCall(server: ServerHandle): Promise<TickResult> {
    const dispatcher = server.replica.dispatcher!;
    const first = nextEvent(server.replica.events, 'dispatch:tick', (t) => t.waiters > 0);
    dispatcher.queueChanged();
    await first;
    const second = nextEvent(server.replica.events, 'dispatch:tick', (t) => t.waiters > 0);
    dispatcher.queueChanged();
    return second;
  }

  const leaseCount = async (stepIds: number[]) => (await db.current.pool.query(`SELECT count(*)::int AS n FROM step_leases WHERE step_id = ANY($1::bigint[])`, [stepIds])).rows[0].n;

  it('an entry whose owner has no runner waits; once aged past the fallback window a runner parked elsewhere gets it', async () => {
    // Poll windows far longer than the test: a poll that comes back was answered, not timed out.
    const [a, b] = await fleet([undefined, undefined], { pollWindowMs: HOUR_MS });
    const runner = await new TestRunner(b.url).register(registration);
    const { stepIds } = await runOn(a);
    const parked = runner.acquire({ wait_ms: HOUR_MS });
    let answered = false;
    void parked.then(() => (answered = true));
    await waitFor(() => b.replica.dispatcher!.registry.size === 1, { what: 'the poll parked' });
    // b ticked with the runner in hand and the entry ready, and claimed nothing: the entry is a's
    // and fresh. It is still on the queue, under no lease, and the poll is still parked.
    const fresh = await tickWithParkedCall(b);
    expect(fresh).toMatchObject({ claimed: 0, delivered: 0 });
    expect(await leaseCount(stepIds)).toBe(0);
    expect((await db.current.pool.query(`SELECT step_id FROM queue_ready WHERE step_id = $1`, [stepIds[0]])).rowCount).toBe(1);
    expect(answered).toBe(false);
    // Time passes for the entry: it has now waited longer than the 15 s window.
    await db.current.pool.query(`UPDATE queue_ready SET ready_at = now() - interval '16 seconds' WHERE step_id = $1`, [stepIds[0]]);
    b.replica.dispatcher!.queueChanged();
    const aged = await parked;
    expect(aged.status).toBe(200);
    expect(aged.body.offers.map((o: any) => o.step_id)).toEqual(stepIds);
    const { rows } = await db.current.pool.query(`SELECT holder FROM step_leases WHERE step_id = $1`, [stepIds[0]]);
    expect(rows[0].holder).toBe(b.replica.replicaId);
  });

  it('quiescing a replica answers its parked polls empty at once while it keeps serving', async () => {
    // Poll windows far longer than the test: a poll that comes back was answered, not timed out.
    const [, b] = await fleet([undefined, undefined], { pollWindowMs: HOUR_MS });
    const runner = await new TestRunner(b.url).register(registration);
    const parked = runner.acquire({ wait_ms: HOUR_MS });
    await waitFor(() => b.replica.dispatcher!.registry.size === 1, { what: 'the poll parked' });
    const left = nextEvent(b.replica.events, 'membership:changed');
    await replicaSetQuiesced(db.current.pool, { id: b.replica.replicaId, quiesced: true });
    await left;
    expect((await parked).status).toBe(204);
    // New polls on the quiesced replica are held and answered empty, never parked nor matched:
    // the answer says it was held (a parked poll that timed out would say empty), and the entry
    // waiting meanwhile is still under no lease.
    const { stepIds } = await runOn(servers[0]);
    const outcome = nextEvent(b.replica.events, 'acquire:answered');
    const again = await runner.acquire({ wait_ms: 500 });
    expect(again.status).toBe(204);
    expect(await outcome).toEqual({ outcome: 'held', offers: 0 });
    expect(b.replica.dispatcher!.registry.size).toBe(0);
    expect(await leaseCount(stepIds)).toBe(0);
    expect((await fetch(`${b.url}/healthz`)).status).toBe(200);
    // Stopping a quiesced replica answers its held polls at once instead of waiting out their window.
    const registered = await new TestRunner(servers[0].url).register(registration);
    const other = Object.assign(new TestRunner(b.url), { credential: registered.credential, runnerId: registered.runnerId });
    const held = other.acquire({ wait_ms: HOUR_MS });
    // The poll is in its hold once b has recorded it as the runner's replica (written just before).
    await waitFor(async () => (await db.current.pool.query(`SELECT last_replica FROM runners WHERE id = $1`, [other.runnerId])).rows[0].last_replica === b.replica.replicaId);
    await b.stop();
    servers = servers.filter((s) => s !== b);
    expect((await held).status).toBe(204);
  }, 120_000);

  it('a site\'s stamped work falls back to another site the moment its last replica is quiesced', async () => {
    const [a, b, c] = await fleet(['dc1', 'dc2', 'dc1'], { pollWindowMs: HOUR_MS });
    const runner = await new TestRunner(a.url).register(registration);
    // A dc2-stamped entry on a shard a third replica (dc1) owns: a's runner may not take it while dc2 is live.
    const { stepIds } = await runOn(c);
    await db.current.pool.query(`UPDATE queue_ready SET site_stamp = 'dc2' WHERE step_id = $1`, [stepIds[0]]);
    const parked = runner.acquire({ wait_ms: HOUR_MS });
    let answered = false;
    void parked.then(() => (answered = true));
    await waitFor(() => a.replica.dispatcher!.registry.size === 1, { what: 'the poll parked' });
    // a ticked with the runner in hand and the stamped entry ready, and claimed nothing.
    expect(await tickWithParkedCall(a)).toMatchObject({ claimed: 0, delivered: 0 });
    expect(await leaseCount(stepIds)).toBe(0);
    expect(answered).toBe(false);
    await replicaSetQuiesced(db.current.pool, { id: b.replica.replicaId, quiesced: true });
    await waitFor(() => !a.replica.ownership.liveSites().has('dc2'), { what: 'dc2 out of the live sites' });
    a.replica.dispatcher!.queueChanged();
    const res = await parked;
    expect(res.status).toBe(200);
    expect(res.body.offers.map((o: any) => o.step_id)).toEqual(stepIds);
    expect(c.replica.ownership.owned()).toContain(shardOf((await db.current.pool.query(`SELECT run_id FROM steps WHERE id = $1`, [stepIds[0]])).rows[0].run_id));
  });

  it('a dead replica\'s un-acked offer comes back as a new attempt and the late ack is fenced', async () => {
    // A staleness window of 2 s (20 ticks) rather than 15 s: a replica that stops beating is dead
    // soon enough to wait for, with nothing written into the past.
    const [a, b] = await fleet([undefined, undefined], {}, { stalenessMs: 2_000 });
    const runner = await new TestRunner(a.url).register(registration);
    const { stepIds } = await runOn(a);
    const offered = await runner.acquire({ wait_ms: 5_000 });
    expect(offered.status).toBe(200);
    const offer = offered.body.offers[0];
    expect(offer.attempt).toBe(1);
    // The replica dies without a word: its heartbeat stops and its loops with it.
    await a.halt();
    const tick = await nextEvent(b.replica.events, 'coordination:tick', (t) => t.reclaimed.length > 0);
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
