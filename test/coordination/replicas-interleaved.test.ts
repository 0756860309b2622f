import { afterAll, describe, expect, it } from 'vitest';
import { nextEvent } from '../../src/events.js';
import { shardsOf } from '../../src/core/rendezvous.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { runSubmitMany } from '../../src/orchestrator/submit.js';
import type { ReplicaPlan, ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { leaderDuties } from '../../src/features.js';
import { startTestServer } from '../support/server.js';

const plan = (): ReplicaPlan => ({
  coordination: { timing: { tickMs: 100 }, hooks: orchestratorHooks, leaderDuties: [leaderDuties.expirySweep] },
  dispatch: { hooks: orchestratorHooks, ownExpiryLoop: false },
});

/** Two roots, a wide middle that needs both, and a last step that needs the middle: releases and roll-ups on every path. */
const run = (i: number) => `
name: interleaved-${i}
project: p${i % 3}
steps:
  r1: { run: 'true' }
  r2: { run: 'true' }
${Array.from({ length: 6 }, (_, k) => `  m${k}: { run: 'true', needs: [r1, r2] }`).join('\n')}
  last: { run: 'true', needs: [${Array.from({ length: 6 }, (_, k) => `m${k}`).join(', ')}] }
  free: { run: 'true' }
`;

describe('three replicas completing interleaved steps of the same runs', () => {
  const db = useTestDatabase();
  const servers: ServerHandle[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it('every run succeeds, each step once, with no deadlock and no 5xx, whichever replica each completion reaches', async () => {
    const pool = db.current.pool;
    const registration = (await tokenCreate(pool, { kind: 'registration', name: 't' })).secret;
    servers.push(...(await Promise.all([0, 1, 2].map(() => startTestServer(db.current.url, { plan: plan() })))));
    const ids = servers.map((s) => s.replica.replicaId);
    await Promise.all(servers.map((s) => nextEvent(s.replica.events, 'coordination:tick', (t) => t.live.length === 3)));
    await waitFor(() => servers.every((s) => JSON.stringify(s.replica.ownership.owned()) === JSON.stringify(shardsOf(s.replica.replicaId, ids))), { what: 'the rendezvous assignment in place' });

    const runs = await runSubmitMany(pool, Array.from({ length: 24 }, (_, i) => runFileLoad(run(i))), { actor: 'test' });
    const total = runs.length * 10;
    // Two runners parked on each replica; each sends its completions to the next replica along,
    // and its acks to the one after (half the runners still ask for ack_on_delivery, which servers ignore).
    const runners = await Promise.all(Array.from({ length: 6 }, (_, i) => new TestRunner(servers[i % 3].url).register(registration, { name: `r${i}`, max_load: 4 })));
    const statuses: number[] = [];
    let completed = 0;
    let stop = false;
    const loop = async (r: TestRunner, i: number) => {
      const via = (k: number) => Object.assign(new TestRunner(servers[(i + k) % 3].url), { credential: r.credential });
      let turn = 0;
      while (!stop) {
        const got = await r.acquire({ max_offers: 4, wait_ms: 1_000, ...(i % 2 === 0 ? { ack_on_delivery: true } : {}) });
        statuses.push(got.status);
        if (got.status !== 200) continue;
        const offers = got.body.offers as Array<{ step_id: number; token: string; acked?: boolean }>;
        const toAck = offers.filter((o) => !o.acked).map((o) => ({ step_id: o.step_id, token: o.token }));
        if (toAck.length > 0) {
          const ack = await via(2 + turn).call('ack', { leases: toAck });
          statuses.push(ack.status);
          expect(ack.body.results.every((x: { ok: boolean }) => x.ok)).toBe(true);
        }
        // Completions one by one, alternating replicas, so a run's steps finish on all three at once.
        await Promise.all(
          offers.map(async (o, k) => {
            const done = await via(1 + turn + k).call('complete', { completions: [{ step_id: o.step_id, token: o.token, exit_code: 0 }] });
            statuses.push(done.status);
            expect(done.body.results[0].ok).toBe(true);
            completed++;
          }),
        );
        turn++;
      }
    };
    const loops = runners.map((r, i) => loop(r, i));
    const failures: unknown[] = [];
    for (const l of loops) l.catch((err) => failures.push(err));
    try {
      await waitFor(() => completed >= total || failures.length > 0, { what: `${total} completions`, timeoutMs: 120_000 });
    } finally {
      stop = true;
      await Promise.allSettled(loops);
    }
    expect(failures).toEqual([]);

    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(completed).toBe(total);
    const { rows: states } = await pool.query(`SELECT status, open_steps, count(*)::int AS n FROM runs GROUP BY status, open_steps`);
    expect(states).toEqual([{ status: 'succeeded', open_steps: 0, n: runs.length }]);
    const { rows: steps } = await pool.query(`SELECT status, attempt, count(*)::int AS n FROM steps GROUP BY status, attempt`);
    expect(steps).toEqual([{ status: 'succeeded', attempt: 1, n: total }]);
    const { rows: done } = await pool.query(`SELECT count(*)::int AS n, count(DISTINCT step_id)::int AS steps FROM completed_attempts`);
    expect(done[0]).toEqual({ n: total, steps: total });
  });
});
