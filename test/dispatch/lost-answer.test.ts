import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expireOnce } from '../../src/dispatch/lifecycle.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { truncateLive, useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun } from '../support/seed.js';
import { startTestServer } from '../support/server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { withHostPort } from '../support/urls.js';

/**
 * A lost answer to an acquire never strands a step: the delivery is committed but the runner never
 * hears of it (its answer lost on the way, or the server's own connection cut as the delivery
 * committed). A retry of the same request id gets the same offers back from the committed rows, and
 * an offer the runner never acked goes back to the queue at its ack deadline, not at the lease TTL.
 */
describe('a lost answer to an acquire', () => {
  const db = useTestDatabase();
  let proxy: TcpProxy;
  let server: ServerHandle;
  let regToken: string;

  beforeAll(async () => {
    const u = new URL(db.current.url);
    proxy = new TcpProxy(u.hostname, Number(u.port || 5432));
    const port = await proxy.start();
    // Unnamed statements: the delivery's text is on the wire on every call, for the proxy to spot.
    server = await startTestServer(withHostPort(db.current.url, '127.0.0.1', port), {
      plan: { dispatch: { hooks: orchestratorHooks } },
      config: { leaseTtlMs: 60_000, pollWindowMs: 10_000, preparedStatements: false },
    });
    regToken = (await tokenCreate(db.current.pool, { kind: 'registration', name: 't' })).secret;
  });
  afterAll(async () => {
    await server?.stop();
    await proxy?.stop();
  });
  beforeEach(async () => {
    proxy.clearDrops();
    await truncateLive(db.current.pool, 'queue_ready, step_leases, completed_attempts, pool_holds, run_pins');
  });

  const runner = () => new TestRunner(server.url).register(regToken);
  const lease = async (stepId: number) =>
    (
      await db.current.pool.query(
        `SELECT attempt, token::text, acked_at, extract(epoch FROM ack_deadline - delivered_at) * 1000 AS ack_ms, extract(epoch FROM expires_at - delivered_at) * 1000 AS ttl_ms
           FROM step_leases WHERE step_id = $1`,
        [stepId],
      )
    ).rows[0];

  it('an offer asked for ack_on_delivery is not acked by its delivery: unanswered, it is re-offered at the ack deadline, not the TTL', async () => {
    const lost = await runner();
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    // The runner asked for its offers acked on delivery, and the answer never reached it.
    const first = await lost.acquire({ request_id: 'never-read', ack_on_delivery: true, fresh: true });
    expect(first.status).toBe(200);
    expect(first.body.offers[0].acked).toBeUndefined();
    const row = await lease(stepIds[0]);
    expect(row.acked_at).toBeNull();
    expect(Number(row.ack_ms)).toBe(first.body.offers[0].ack_deadline_ms);
    expect(Number(row.ack_ms)).toBeLessThan(Number(row.ttl_ms));
    // The sweep judges a moment past the ack deadline (and short of the TTL), with no ack.
    const { rows: due } = await db.current.pool.query(`SELECT ack_deadline + interval '1 millisecond' AS at FROM step_leases WHERE step_id = $1`, [stepIds[0]]);
    const sweep = await expireOnce(server.replica.dispatcher!, { now: due[0].at });
    expect(sweep).toMatchObject({ requeued: 1, lost: 0 });
    const other = await runner();
    const again = await other.acquire({ wait_ms: 5_000 });
    expect(again.status).toBe(200);
    expect(again.body.offers[0]).toMatchObject({ step_id: stepIds[0], attempt: 2 });
    // The first runner's late ack is fenced: it never starts the step.
    const late = await lost.call('ack', { leases: [{ step_id: stepIds[0], token: first.body.offers[0].token }] });
    expect(late.body.results[0]).toMatchObject({ ok: false, status: 409 });
  });

  it('a delivery committed whose answer the server never heard is not answered empty: the retry of the same request id gets it from the store', async () => {
    const r = await runner();
    // The delivery statement runs and commits, but its reply is lost with the server's connection.
    const cut = proxy.dropNextReplyTo(/INSERT INTO step_leases/);
    const pending = r.acquire({ request_id: 'unknown-outcome', wait_ms: 8_000, fresh: true });
    await waitFor(() => server.replica.dispatcher!.registry.size === 1, { what: 'acquire parked' });
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    await cut;
    const answer = await pending;
    const committed = await waitFor(() => lease(stepIds[0]), { what: 'the delivery committed' });
    expect(answer.status).toBe(503);
    expect(answer.body.error.message).toMatch(/^store unavailable: .*retry the same request_id/);
    const retry = await r.acquire({ request_id: 'unknown-outcome', wait_ms: 8_000 });
    expect(retry.status).toBe(200);
    expect(retry.body.offers).toHaveLength(1);
    expect(retry.body.offers[0]).toMatchObject({ step_id: stepIds[0], attempt: 1, token: committed.token });
    // The replayed offer is the runner's to ack as any other.
    const ack = await r.call('ack', { leases: [{ step_id: stepIds[0], token: committed.token }] });
    expect(ack.body.results[0]).toEqual({ step_id: stepIds[0], ok: true });
  });
});
