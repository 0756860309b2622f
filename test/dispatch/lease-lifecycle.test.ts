import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expireOnce, FENCED, RUNNER_LOST_CAUSE } from '../../src/dispatch/lifecycle.js';
import type { OrchestratorHooks, StepOutcome } from '../../src/orchestrator/contract.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { truncateLive, useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun } from '../support/seed.js';
import { startTestServer } from '../support/server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { justPast } from '../support/lifecycle.js';
import { withHostPort } from '../support/urls.js';

/** Records what the lease lifecycle reports; the orchestrator proper is tested on its own. */
class RecordingHooks implements OrchestratorHooks {
  started: Array<{ stepId: number; attempt: number; runnerId: string }> = [];
  finished: StepOutcome[] = [];
  requeued: Array<{ stepId: number; fromAttempt: number; toAttempt: number; reason: string }> = [];
  async stepStarted(_c: unknown, p: { stepId: number; attempt: number; runnerId: string }) {
    this.started.push(p);
  }
  async stepFinished(_c: unknown, o: StepOutcome) {
    this.finished.push(o);
  }
  async stepsStarted(c: unknown, items: Array<{ stepId: number; attempt: number; runnerId: string }>) {
    for (const i of items) await this.stepStarted(c, i);
  }
  async stepsFinished(c: unknown, outcomes: StepOutcome[]) {
    for (const o of outcomes) await this.stepFinished(c, { ...o, runId: undefined });
  }
  async stepRequeued(_c: unknown, p: { stepId: number; fromAttempt: number; toAttempt: number; reason: string }) {
    this.requeued.push(p);
  }
  reset() {
    this.started = [];
    this.finished = [];
    this.requeued = [];
  }
}

describe('the lease lifecycle over the runner protocol', () => {
  const db = useTestDatabase();
  const hooks = new RecordingHooks();
  let proxy: TcpProxy;
  let server: ServerHandle;
  let regToken: string;

  beforeAll(async () => {
    const u = new URL(db.current.url);
    proxy = new TcpProxy(u.hostname, Number(u.port || 5432));
    const port = await proxy.start();
    server = await startTestServer(withHostPort(db.current.url, '127.0.0.1', port), {
      plan: { dispatch: { hooks } },
      // A poll window far longer than any test: a poll that comes back was answered, not timed out.
      config: { leaseTtlMs: 3_000, pollWindowMs: 3_600_000 },
    });
    regToken = (await tokenCreate(db.current.pool, { kind: 'registration', name: 't' })).secret;
  });
  afterAll(async () => {
    await server?.stop();
    await proxy?.stop();
  });
  beforeEach(async () => {
    hooks.reset();
    await truncateLive(db.current.pool, 'queue_ready, step_leases, completed_attempts, pool_holds, run_pins');
  });

  const runner = () => new TestRunner(server.url).register(regToken);

  it('refuses a bad registration token and bad bodies, naming the field', async () => {
    const r = new TestRunner(server.url);
    expect((await r.call('register', { registration_token: 'ocreg_nope', name: 'x' }, { auth: false })).status).toBe(401);
    const bad = await r.call('register', { registration_token: regToken }, { auth: false });
    expect(bad).toEqual({ status: 400, body: { error: { code: 'invalid_input', message: 'name: required' } } });
    const ok = await runner();
    const badAcquire = await ok.call('acquire', { request_id: 'a', max_offers: 500 });
    expect(badAcquire.status).toBe(400);
    expect(badAcquire.body.error.message).toMatch(/^max_offers: /);
    const unknown = await ok.call('complete', { completions: [{ step_id: 1, token: '1', exit_code: 0, extra: 1 }] });
    expect(unknown).toEqual({ status: 400, body: { error: { code: 'invalid_input', message: 'completions.0.extra: unknown field' } } });
    const noCred = await new TestRunner(server.url).call('acquire', { request_id: 'a' });
    expect(noCred).toEqual({ status: 401, body: { error: { code: 'credential_invalid', message: 'credential invalid' } } });
    const { rows } = await db.current.pool.query('SELECT count(*)::int AS n FROM runners');
    expect(rows[0].n).toBe(1);
  });

  it('answers an empty poll with 204 when its window passes', async () => {
    const r = await runner();
    expect((await r.acquire({ wait_ms: 100 })).status).toBe(204);
  });

  it('delivers to a parked acquire as soon as work is enqueued, then ack, renew, complete once', async () => {
    const r = await runner();
    const pending = r.acquire({ wait_ms: 8_000 });
    await waitFor(() => server.replica.dispatcher!.registry.size === 1, { what: 'acquire parked' });
    const { runId, stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'build', command: 'make build', env: { A: 'step' } }], env: { A: 'run', B: 'run' } });
    const res = await pending;
    expect(res.status).toBe(200);
    const [offer] = res.body.offers;
    expect(offer).toMatchObject({ step_id: stepIds[0], run_id: runId, attempt: 1, step: 'build', command: 'make build', env: { A: 'step', B: 'run' }, lease_ttl_ms: 3000 });
    expect(offer.ack_deadline_ms).toBeLessThan(3000);
    expect(hooks.started).toEqual([{ stepId: stepIds[0], attempt: 1, runnerId: r.runnerId }]);
    const ref = { step_id: offer.step_id, token: offer.token };
    expect((await r.call('ack', { leases: [ref] })).body.results).toEqual([{ step_id: offer.step_id, ok: true }]);
    expect((await r.call('renew', { leases: [ref] })).body.results).toEqual([{ step_id: offer.step_id, ok: true }]);
    expect((await r.call('logs', { ...ref, chunks: [{ stream: 'stdout', text: 'hello\n' }] })).status).toBe(200);
    const done = await r.call('complete', { completions: [{ ...ref, exit_code: 0 }] });
    expect(done.body.results).toEqual([{ step_id: offer.step_id, ok: true }]);
    const again = await r.call('complete', { completions: [{ ...ref, exit_code: 0 }] });
    expect(again.body.results).toEqual([{ step_id: offer.step_id, ok: true }]);
    expect(hooks.finished).toHaveLength(1);
    expect(hooks.finished[0]).toMatchObject({ stepId: offer.step_id, attempt: 1, status: 'succeeded', exitCode: 0 });
    const { rows } = await db.current.pool.query('SELECT count(*)::int AS n FROM completed_attempts WHERE step_id = $1', [offer.step_id]);
    expect(rows[0].n).toBe(1);
    const logs = await db.current.pool.query('SELECT chunk FROM step_logs WHERE step_id = $1', [offer.step_id]);
    expect(logs.rows.map((x) => x.chunk).join('')).toContain('hello');
  });

  it('fences a stale token on renew, logs and complete with the exact verdict', async () => {
    const r = await runner();
    await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { body } = await r.acquire();
    const stale = { step_id: body.offers[0].step_id, token: String(Number(body.offers[0].token) + 1000) };
    expect((await r.call('renew', { leases: [stale] })).body.results[0]).toEqual({ step_id: stale.step_id, ok: false, status: 409, error: FENCED });
    expect(await r.call('logs', { ...stale, chunks: [] })).toEqual({ status: 409, body: { error: { code: 'lease_lost', message: FENCED } } });
    expect((await r.call('complete', { completions: [{ ...stale, exit_code: 0 }] })).body.results[0].error).toBe(FENCED);
    expect(hooks.finished).toHaveLength(0);
    const other = await runner();
    const real = { step_id: body.offers[0].step_id, token: body.offers[0].token };
    expect((await other.call('renew', { leases: [real] })).body.results[0].error).toBe(FENCED);
  });

  it('an acquire carrying completions commits them first, hands out what they freed, and answers after one tick when nothing is left', async () => {
    const r = await runner();
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'a' }, { name: 'b' }] });
    const first = await r.acquire({ max_offers: 1, ack_on_delivery: true, fresh: true });
    const [a] = first.body.offers;
    // The call carries a's completion and a stale token: each gets its own verdict, in order.
    const stale = { step_id: stepIds[1], token: '999999', exit_code: 0 };
    const second = await r.acquire({ max_offers: 1, ack_on_delivery: true, fresh: true, completions: [{ step_id: a.step_id, token: a.token, exit_code: 0 }, stale] });
    expect(second.status).toBe(200);
    expect(second.body.results).toEqual([{ step_id: a.step_id, ok: true }, { step_id: stepIds[1], ok: false, status: 409, error: FENCED }]);
    expect(second.body.offers.map((o: { step_id: number }) => o.step_id)).toEqual([stepIds[1]]);
    expect(hooks.finished.map((o) => [o.stepId, o.status])).toEqual([[a.step_id, 'succeeded']]);
    const b = second.body.offers[0];
    // Nothing left to hand out: the results come back after one tick, not at the end of the (hour-long) window.
    const third = await r.acquire({ wait_ms: 3_600_000, ack_on_delivery: true, fresh: true, completions: [{ step_id: b.step_id, token: b.token, exit_code: 3 }] });
    expect(third).toEqual({ status: 200, body: { offers: [], results: [{ step_id: b.step_id, ok: true }] } });
    expect(hooks.finished.map((o) => [o.stepId, o.status, o.exitCode])).toEqual([[a.step_id, 'succeeded', 0], [b.step_id, 'failed', 3]]);
    // A retried carrying call (same request id, no `fresh`) repeats nothing: the completion answers ok once more.
    const again = await r.acquire({ request_id: 'carry-retry', wait_ms: 9_000, completions: [{ step_id: b.step_id, token: b.token, exit_code: 3 }] });
    expect(again.body.results).toEqual([{ step_id: b.step_id, ok: true }]);
    expect(hooks.finished).toHaveLength(2);
    const bad = await r.acquire({ completions: [{ step_id: b.step_id, token: b.token }] });
    expect(bad).toEqual({ status: 400, body: { error: { code: 'invalid_input', message: 'completions.0.exit_code: required' } } });
  });

  it('enqueue of the same step and attempt twice queues once', async () => {
    const { stepIds, runId } = await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { queueEnqueue } = await import('../../src/store/queue.js');
    const again = await queueEnqueue(db.current.pool, [{ stepId: stepIds[0], runId, attempt: 1, priority: 0, lane: 2, fairKey: 'default', pools: [], requirement: null, load: 1, runScope: false, maxParallel: 1, siteStamp: null }]);
    expect(again).toEqual([]);
    const { rows } = await db.current.pool.query('SELECT count(*)::int AS n FROM queue_ready');
    expect(rows[0].n).toBe(1);
  });

  it('hands several offers to one call that asks for them', async () => {
    // Room for three steps of load 1 at once (max_load defaults to 1).
    const r = await new TestRunner(server.url).register(regToken, { max_load: 3 });
    await seedRun(db.current.pool, { steps: [1, 2, 3, 4, 5].map((i) => ({ name: `s${i}` })) });
    const res = await r.acquire({ max_offers: 3 });
    expect(res.body.offers).toHaveLength(3);
    expect(new Set(res.body.offers.map((o: { step_id: number }) => o.step_id)).size).toBe(3);
  });

  it('answers a retried acquire with the same offers', async () => {
    const r = await runner();
    await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const first = await r.acquire({ request_id: 'lost-answer' });
    const retry = await r.acquire({ request_id: 'lost-answer', wait_ms: 200 });
    expect(retry.status).toBe(200);
    expect(retry.body.offers).toEqual(first.body.offers);
    // The lease keeps a 64-bit digest of the request id, not the id; another id is not a retry.
    const { rows } = await db.current.pool.query(`SELECT request_id, request_key = hashtextextended('lost-answer', 0) AS keyed FROM step_leases`);
    expect(rows).toEqual([{ request_id: null, keyed: true }]);
    const other = await r.acquire({ request_id: 'another-call', wait_ms: 100 });
    expect(other.status).toBe(204);
  });

  it('re-queues an offer nobody acked as the next attempt, at its original position', async () => {
    const r = await runner();
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { rows: before } = await db.current.pool.query('SELECT position FROM queue_ready WHERE step_id = $1', [stepIds[0]]);
    await r.acquire();
    expect((await expireOnce(server.replica.dispatcher!)).requeued).toBe(0);
    const sweep = await expireOnce(server.replica.dispatcher!, { now: await justPast(db.current.pool, 'ack_deadline') });
    expect(sweep.requeued).toBe(1);
    const { rows } = await db.current.pool.query('SELECT attempt, position FROM queue_ready WHERE step_id = $1', [stepIds[0]]);
    expect(rows).toEqual([{ attempt: 2, position: before[0].position }]);
    expect(hooks.requeued).toEqual([expect.objectContaining({ stepId: stepIds[0], fromAttempt: 1, toAttempt: 2 })]);
  });

  it('fails a silent runner\'s attempt as runner_lost after its TTL; its late completion is fenced', async () => {
    const r = await runner();
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { body } = await r.acquire();
    const ref = { step_id: body.offers[0].step_id, token: body.offers[0].token };
    await r.call('ack', { leases: [ref] });
    expect((await expireOnce(server.replica.dispatcher!)).lost).toBe(0);
    const sweep = await expireOnce(server.replica.dispatcher!, { now: await justPast(db.current.pool, 'expires_at') });
    expect(sweep.lost).toBe(1);
    expect(hooks.finished).toEqual([expect.objectContaining({ stepId: stepIds[0], attempt: 1, status: 'system_error', cause: RUNNER_LOST_CAUSE, event: 'runner_lost' })]);
    expect((await r.call('complete', { completions: [{ ...ref, exit_code: 0 }] })).body.results[0].error).toBe(FENCED);
    expect(hooks.finished).toHaveLength(1);
    expect((await db.current.pool.query('SELECT count(*)::int AS n FROM queue_ready')).rows[0].n).toBe(0);
  });

  it('holds the expiry sweep during a platform halt', async () => {
    const r = await runner();
    await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { body } = await r.acquire();
    await r.call('ack', { leases: [{ step_id: body.offers[0].step_id, token: body.offers[0].token }] });
    const past = await justPast(db.current.pool, 'expires_at');
    await db.current.pool.query(`UPDATE fleet_posture SET halted = true`);
    try {
      expect((await expireOnce(server.replica.dispatcher!, { now: past })).halted).toBe(true);
      expect((await db.current.pool.query('SELECT count(*)::int AS n FROM step_leases')).rows[0].n).toBe(1);
    } finally {
      await db.current.pool.query(`UPDATE fleet_posture SET halted = false`);
    }
  });

  it('a quiesced fleet hands out no offers; resume lets them flow', async () => {
    const { postureLever } = await import('../../src/ops/domain/postures.js');
    const r = await runner();
    await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    await postureLever(db.current.pool, { fields: ['quiesced'], value: true, actor: 'test' });
    try {
      expect((await r.acquire({ wait_ms: 300 })).status).toBe(204);
      expect((await db.current.pool.query('SELECT count(*)::int AS n FROM queue_ready')).rows[0].n).toBe(1);
    } finally {
      await postureLever(db.current.pool, { fields: ['quiesced'], value: false, actor: 'test' });
    }
    expect((await r.acquire({ wait_ms: 5_000 })).status).toBe(200);
  });

  it('release puts the step back as the next attempt', async () => {
    const r = await runner();
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { body } = await r.acquire();
    const res = await r.call('release', { leases: [{ step_id: body.offers[0].step_id, token: body.offers[0].token, reason: 'shutting down' }] });
    expect(res.body.results[0].ok).toBe(true);
    expect((await db.current.pool.query('SELECT attempt FROM queue_ready WHERE step_id = $1', [stepIds[0]])).rows).toEqual([{ attempt: 2 }]);
  });

  it('an acquire that went away before its offer was sent hands the claim back at its attempt and position', async () => {
    const r = await runner();
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { rows: before } = await db.current.pool.query('SELECT position FROM queue_ready');
    const { rows: runnerRows } = await db.current.pool.query('SELECT * FROM runners WHERE id = $1', [r.runnerId]);
    const { mapRunner } = await import('../../src/store/runners.js');
    const deps = server.replica.dispatcher!;
    // A call that is snapshotted by the tick but settles (client gone) before the answer.
    const { acquire } = deps.registry.park({ runner: mapRunner(runnerRows[0]), requestId: 'gone', slots: 1, onlyRunId: null, parkedAt: Date.now() }, 5_000);
    const realDeliver = acquire.deliver;
    let refused = 0;
    acquire.deliver = () => {
      refused += 1;
      realDeliver([]);
      return false;
    };
    // The server's own dispatch loop may win the claim before this tick: either way the one
    // delivery reaches the call that went away.
    await deps.tick();
    await waitFor(() => refused === 1, { what: 'the delivery refused by the call that went away' });
    await waitFor(async () => (await db.current.pool.query('SELECT attempt, position FROM queue_ready WHERE step_id = $1', [stepIds[0]])).rows[0], { what: 'claim handed back' });
    expect((await db.current.pool.query('SELECT attempt, position FROM queue_ready')).rows).toEqual([{ attempt: 1, position: before[0].position }]);
  });

  it('answers 503 store unavailable while the store hangs, and the lease survives', async () => {
    const r = await runner();
    await seedRun(db.current.pool, { steps: [{ name: 'a' }] });
    const { body } = await r.acquire();
    const ref = { step_id: body.offers[0].step_id, token: body.offers[0].token };
    await r.call('ack', { leases: [ref] });
    proxy.refuse();
    try {
      const res = await r.call('renew', { leases: [ref] });
      expect(res.status).toBe(503);
      expect(res.body.error).toEqual({ code: 'store_unavailable', message: expect.stringMatching(/^store unavailable: .+ \(this server's readiness check 'store' is failing; retry\)$/) });
    } finally {
      proxy.heal();
    }
    const back = await waitFor(async () => {
      const res = await r.call('renew', { leases: [ref] });
      return res.status === 200 ? res : undefined;
    }, { what: 'renew after the store returns' });
    expect(back!.body.results[0].ok).toBe(true);
  });
});
