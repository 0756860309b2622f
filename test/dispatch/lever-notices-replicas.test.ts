import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf } from '../../src/core/fnv.js';
import { shardsOf } from '../../src/core/rendezvous.js';
import { nextEvent } from '../../src/events.js';
import { leaderDuties } from '../../src/features.js';
import { postureLever } from '../../src/ops/domain/postures.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ReplicaPlan, ServerHandle } from '../../src/server.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { runCli } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun, type SeedStep } from '../support/seed.js';
import { startTestServer } from '../support/server.js';

/** Well under the 2 s an unplaced-work sighting may hold, and under any poll's window. */
const PROMPT_MS = 1_000;
/** Poll windows far longer than the test: a poll that comes back was answered, not timed out. */
const WINDOW_MS = 60_000;

const plan: ReplicaPlan = {
  coordination: { timing: { tickMs: 100 }, hooks: orchestratorHooks, leaderDuties: [leaderDuties.expirySweep] },
  ops: true,
  dispatch: { hooks: orchestratorHooks, ownExpiryLoop: false },
};

/** A poll in flight: its answer, when it came, and whether it has come yet. */
interface Poll { answer: Promise<{ status: number; body: any }>; at: Promise<number>; done: () => boolean }
const poll = (runner: TestRunner): Poll => {
  let done = false;
  const answer = runner.acquire({ wait_ms: WINDOW_MS });
  const at = answer.then(() => ((done = true), Date.now()));
  return { answer, at, done: () => done };
};

describe('postures and drains reach parked polls at once (two replicas over HTTP)', () => {
  const db = useTestDatabase();
  let a: ServerHandle;
  let b: ServerHandle;
  let admin: string;
  let registration: string;

  beforeAll(async () => {
    registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'r' })).secret;
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ops' })).secret;
    [a, b] = await Promise.all([0, 1].map(() => startTestServer(db.current.url, { config: { pollWindowMs: WINDOW_MS }, plan })));
    const ids = [a, b].map((s) => s.replica.replicaId);
    await waitFor(() => [a, b].every((s) => JSON.stringify(s.replica.ownership.owned()) === JSON.stringify(shardsOf(s.replica.replicaId, ids))), { what: 'the rendezvous assignment in place' });
  });
  afterAll(async () => Promise.all([a, b].map((s) => s?.stop())));

  const lever = async (server: ServerHandle, path: string, body: unknown) => {
    const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
  };

  /** A run of one step whose shard `owner` owns, so `owner`'s runners are the ones offered it. */
  const runOn = async (owner: ServerHandle, step: SeedStep): Promise<number> => {
    for (;;) {
      const { runId } = await seedRun(db.current.pool, { steps: [step] });
      if (owner.replica.ownership.owned().includes(shardOf(runId))) return runId;
      await db.current.pool.query(`DELETE FROM queue_ready WHERE run_id = $1`, [runId]);
    }
  };

  const parked = (server: ServerHandle, n: number) => waitFor(() => server.replica.dispatcher!.registry.size === n, { what: `${n} polls parked` });

  it('drain, halt, resume and undrain, each written elsewhere, reach the parked polls they concern within a second, and only those', async () => {
    const r1 = await new TestRunner(a.url).register(registration, { labels: ['r1-only'] });
    const r2 = await new TestRunner(a.url).register(registration);
    const r3 = await new TestRunner(b.url).register(registration);

    // A drain of r1 pulled through the other replica's API: r1's poll is answered, held; r2's stays.
    const p1 = poll(r1);
    const p2 = poll(r2);
    await parked(a, 2);
    const held = nextEvent(a.replica.events, 'acquire:answered');
    const heard = nextEvent(a.replica.events, 'lever:heard');
    const drainedAt = Date.now();
    await lever(b, '/api/fleet/drain', { runner: r1.runnerId });
    expect((await p1.answer).status).toBe(204);
    expect((await p1.at) - drainedAt).toBeLessThan(PROMPT_MS);
    expect(await held).toEqual({ outcome: 'held', offers: 0 });
    // Answered at the notice, or (a tick of a's loop held it then) as that tick let go.
    const h = await heard;
    expect([h.lever, h.held + h.owed, h.lifted]).toEqual(['drain', 1, false]);
    expect(p2.done()).toBe(false);

    // A halt written straight to the store: every parked poll, on both replicas.
    const p3 = poll(r3);
    await parked(b, 1);
    const haltedAt = Date.now();
    await postureLever(db.current.pool, { fields: ['halted'], value: true, reason: 'incident', actor: 'cli' });
    for (const p of [p2, p3]) {
      expect((await p.answer).status).toBe(204);
      expect((await p.at) - haltedAt).toBeLessThan(PROMPT_MS);
    }

    // Work waits under the halt with r2 parked again; the resume, pulled through b, offers it to r2 at once.
    const again = poll(r2);
    await parked(a, 1);
    const runId = await runOn(a, { name: 'waiting' });
    const resumedAt = Date.now();
    await lever(b, '/api/admin/platform/resume', {});
    const offered = await again.answer;
    expect(offered.status).toBe(200);
    expect(offered.body.offers.map((o: any) => o.run_id)).toEqual([runId]);
    expect((await again.at) - resumedAt).toBeLessThan(PROMPT_MS);

    // r1, drained, polls: held, out of the parked calls. Work only r1 can take waits; its undrain,
    // written straight to the store, offers it to that very poll.
    const idle = poll(r1);
    await waitFor(async () => (await db.current.pool.query(`SELECT last_replica FROM runners WHERE id = $1`, [r1.runnerId])).rows[0].last_replica === a.replica.replicaId);
    const forR1 = await runOn(a, { name: 'for-r1', placement: { labels: ['r1-only'] } });
    expect(idle.done()).toBe(false);
    const undrainedAt = Date.now();
    await fleetDrainSet(db.current.pool, { runner: r1.runnerId, drained: false, actor: 'cli' });
    const got = await idle.answer;
    expect(got.status).toBe(200);
    expect(got.body.offers.map((o: any) => o.run_id)).toEqual([forR1]);
    expect((await idle.at) - undrainedAt).toBeLessThan(PROMPT_MS);
  });

  it('a drain by the CLI straight to the store (--database-url) answers the runner\'s parked poll within a second of its commit', async () => {
    const r = await new TestRunner(b.url).register(registration, { name: 'cli-drained' });
    const p = poll(r);
    await parked(b, 1);
    const out = await runCli(['fleet', 'drain', 'cli-drained', '--database-url', db.current.url]);
    expect(out.code).toBe(0);
    expect((await p.answer).status).toBe(204);
    // The audit row's time is the drain transaction's start, by the store's clock (this machine's).
    const { rows } = await db.current.pool.query(`SELECT at FROM audit_log WHERE action = 'fleet.drain' AND actor LIKE 'cli%' ORDER BY id DESC LIMIT 1`);
    expect(rows).toHaveLength(1);
    expect((await p.at) - new Date(rows[0].at).getTime()).toBeLessThan(PROMPT_MS);
  });
});
