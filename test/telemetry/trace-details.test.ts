import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { reclaimDeadPeers } from '../../src/coordination/coordinator.js';
import { attemptSpanId, launchSpanId, launchTraceId, runSpanId } from '../../src/core/trace-ids.js';
import { webhookSignature } from '../../src/core/triggers.js';
import { createLogger } from '../../src/logger.js';
import { oneShotAdd, templatePut, webhookAdd } from '../../src/ops/domain/trigger-definitions.js';
import { runCancel } from '../../src/orchestrator/cancel.js';
import { runRetry } from '../../src/orchestrator/retry.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerHandle } from '../../src/server.js';
import { RunTracing, tracedHooks } from '../../src/telemetry/run-tracing.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { DEFAULT_LAUNCH_TIMING, DeferredLaunches, launchOnce } from '../../src/triggers/launch.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';

// The SDK's batch processor exports every 5 s by default; the receiver is waited on either way.
process.env.OTEL_BSP_SCHEDULE_DELAY = '200';

const isRun = (s: ReceivedSpan) => s.name.startsWith('RUN ') && s.attributes['cicd.pipeline.task.name'] === undefined;

/**
 * The parts of a run's trace beyond the plain path: launches by triggers, the verdicts a step
 * waited behind, cancels, reclaimed leases. One replica with traces on, driven by a runner
 * speaking the protocol from the test, so each step ends when the test says.
 */
describe('trace details', { timeout: 120_000 }, () => {
  const db = useTestDatabase();
  const receiver = new OtlpReceiver();
  let server: ServerHandle;
  let runner: TestRunner;
  let token: string;
  let registration: string;
  let tracing: RunTracing;
  beforeAll(async () => {
    await receiver.start();
    tracing = new RunTracing();
    const hooks = tracedHooks(orchestratorHooks, tracing);
    // A short lease, so a runner that stops renewing is declared lost within the test.
    server = await startTestServer(db.current.url, { config: { tracingEndpoint: receiver.url, leaseTtlMs: 4_000 }, plan: { tracing, ops: true, webhooks: true, dispatch: { hooks } } });
    registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 't' })).secret;
    token = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci', scope: 'runs' })).secret;
    runner = await new TestRunner(server.url).register(registration);
  });
  afterAll(async () => {
    await server?.stop();
    await receiver.stop();
  });

  /** Takes one offer and completes it with `exit`. */
  async function runOne(exit = 0, by = runner): Promise<{ step_id: number; token: string }> {
    const offered = await by.acquire({ wait_ms: 10_000 });
    expect(offered.status).toBe(200);
    const offer = offered.body.offers[0];
    const lease = { step_id: offer.step_id, token: offer.token };
    expect((await by.call('ack', { leases: [lease] })).body.results[0]).toMatchObject({ ok: true });
    expect((await by.call('complete', { completions: [{ ...lease, exit_code: exit }] })).body.results[0]).toMatchObject({ ok: true });
    return lease;
  }

  async function submit(definition: unknown): Promise<{ id: number; traceId: string }> {
    const res = await fetch(`${server.url}/api/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ file: JSON.stringify(definition) }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { id: number; traceId: string };
  }

  const launch = () => launchOnce({ pool: db.current.pool, log: createLogger('silent', { pretty: false }), deferred: new DeferredLaunches(), timing: DEFAULT_LAUNCH_TIMING, isLeader: () => true });
  const runTraceOf = async (runId: number): Promise<string> => (await db.current.pool.query(`SELECT trace_id FROM runs WHERE id = $1`, [runId])).rows[0].trace_id;

  it('a run a trigger launched links to the launch, a trace of its own; a webhook delivery likewise', async () => {
    await templatePut(db.current.pool, { text: `name: nightly\nsteps:\n  only:\n    run: "true"\n`, actor: 'test' });
    const once = await oneShotAdd(db.current.pool, { template: 'nightly', at: 'now', actor: 'test' });
    const hook = await webhookAdd(db.current.pool, { template: 'nightly', actor: 'test' });
    const body = JSON.stringify({ ref: 'main' });
    const ts = String(Math.floor(Date.now() / 1000));
    const posted = await fetch(`${server.url}/api/hooks/${hook.id}`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'x-opschain-timestamp': ts, 'x-opschain-signature': webhookSignature(hook.secret, ts, Buffer.from(body)), 'x-opschain-delivery': 'gh-77' },
    });
    expect(posted.status).toBe(202);
    const report = await launch();
    expect(report.fired).toHaveLength(2);
    await runOne();
    await runOne();
    const ticks = (await db.current.pool.query(`SELECT id, trigger_id, run_id FROM trigger_ticks WHERE outcome = 'fired' ORDER BY id`)).rows;
    expect(ticks).toHaveLength(2);

    for (const tick of ticks) {
      const runId = Number(tick.run_id);
      const traceId = await runTraceOf(runId);
      const tickId = Number(tick.id);
      const webhook = Number(tick.trigger_id) === hook.id;
      await waitFor(() => receiver.spans.some((s) => s.traceId === traceId && isRun(s)) && receiver.spans.some((s) => s.traceId === launchTraceId(tickId)), { timeoutMs: 30_000, what: `run ${runId}'s spans and its launch's` });
      const run = receiver.spans.find((s) => s.traceId === traceId && isRun(s))!;
      expect(run.spanId).toBe(runSpanId(traceId, runId, 0));
      // The run is a trace of its own, not the launch's child: the launch is a link.
      expect(run.parentSpanId).toBe('');
      expect(run.links).toEqual([{ traceId: launchTraceId(tickId), spanId: launchSpanId(tickId), attributes: { 'opschain.link': 'launched_by' } }]);
      const launched = receiver.spans.filter((s) => s.traceId === launchTraceId(tickId));
      expect(launched).toHaveLength(1);
      expect(launched[0]).toMatchObject({ name: webhook ? 'opschain.webhook.delivery' : 'opschain.trigger.launch', spanId: launchSpanId(tickId), parentSpanId: '', kind: 4 });
      expect(launched[0].attributes).toMatchObject({
        'opschain.trigger.id': String(webhook ? hook.id : once.id),
        'opschain.trigger.kind': webhook ? 'webhook' : 'once',
        'opschain.run.id': String(runId),
        ...(webhook ? { 'opschain.webhook.delivery.id': 'gh-77' } : {}),
      });
      expect(launched[0].endMs).toBeGreaterThanOrEqual(launched[0].startMs);
      expect(launched[0].endMs).toBeLessThanOrEqual(run.startMs + 1);
    }
    expect(receiver.refused).toEqual([]);
  });

  it('a webhook call with a W3C traceparent starts a run that joins the caller\'s trace (still linked to its delivery); a malformed one is ignored', async () => {
    const callerTrace = '0af7651916cd43dd8448eb211c80319c';
    const callerSpan = 'b7ad6b7169203331';
    const hook = await webhookAdd(db.current.pool, { template: 'nightly', actor: 'test' });
    const post = async (key: string, traceparent: string) => {
      const body = JSON.stringify({ ref: key });
      const ts = String(Math.floor(Date.now() / 1000));
      const res = await fetch(`${server.url}/api/hooks/${hook.id}`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', 'x-opschain-timestamp': ts, 'x-opschain-signature': webhookSignature(hook.secret, ts, Buffer.from(body)), 'x-opschain-delivery': key, traceparent },
      });
      expect(res.status).toBe(202);
    };
    await post('ci-1', `00-${callerTrace}-${callerSpan}-01`);
    await post('ci-2', '00-not-a-traceparent-01');
    const report = await launch();
    expect(report.fired).toHaveLength(2);
    const ticks = (await db.current.pool.query(
      `SELECT t.id, t.run_id, d.delivery_key FROM trigger_ticks t JOIN webhook_deliveries d ON d.id = t.delivery_id WHERE t.trigger_id = $1 ORDER BY d.delivery_key`,
      [hook.id],
    )).rows;
    expect(ticks.map((t) => t.delivery_key)).toEqual(['ci-1', 'ci-2']);
    const joined = Number(ticks[0].run_id);
    const own = Number(ticks[1].run_id);
    expect(await runTraceOf(joined)).toBe(callerTrace);
    expect(await runTraceOf(own)).not.toBe(callerTrace);
    // The step of the joined run is offered under the caller's trace, its attempt span's child.
    const offers: Array<{ step_id: number; traceparent: string; token: string }> = [];
    for (let i = 0; i < 2; i++) {
      const offered = await runner.acquire({ wait_ms: 10_000 });
      const offer = offered.body.offers[0];
      offers.push(offer);
      const lease = { step_id: offer.step_id, token: offer.token };
      expect((await runner.call('ack', { leases: [lease] })).body.results[0]).toMatchObject({ ok: true });
      expect((await runner.call('complete', { completions: [{ ...lease, exit_code: 0 }] })).body.results[0]).toMatchObject({ ok: true });
    }
    const joinedStep = (await db.current.pool.query(`SELECT id FROM steps WHERE run_id = $1`, [joined])).rows[0].id;
    expect(offers.find((o) => o.step_id === Number(joinedStep))!.traceparent).toBe(`00-${callerTrace}-${attemptSpanId(callerTrace, Number(joinedStep), 1)}-01`);

    await waitFor(() => spansOf(callerTrace).some(isRun), { timeoutMs: 30_000, what: 'the joined run\'s span' });
    const run = spansOf(callerTrace).find(isRun)!;
    expect(run).toMatchObject({ spanId: runSpanId(callerTrace, joined, 0), parentSpanId: callerSpan });
    const tickId = Number(ticks[0].id);
    expect(run.links).toEqual([{ traceId: launchTraceId(tickId), spanId: launchSpanId(tickId), attributes: { 'opschain.link': 'launched_by' } }]);
    await waitFor(() => receiver.spans.some((s) => s.traceId === launchTraceId(tickId)), { timeoutMs: 30_000, what: 'the delivery\'s span' });
    // The other run is a trace of its own, a root.
    const ownTrace = await runTraceOf(own);
    await waitFor(() => spansOf(ownTrace).some(isRun), { timeoutMs: 30_000, what: 'the other run\'s span' });
    expect(spansOf(ownTrace).find(isRun)!.parentSpanId).toBe('');
  });

  it('the queue span names the verdicts the entry was set aside on and for how long each, from the store', async () => {
    const { id: runId, traceId } = await submit({ name: 'needs-gpu', steps: { only: { run: 'true', placement: { labels: ['gpu'] } } } });
    // No runner has the label: the tick that answers a polling runner without it sets the entry
    // aside on its verdict.
    const polling = new AbortController();
    const poll = runner.acquire({ wait_ms: 20_000 }, polling.signal).catch(() => undefined);
    const blocked = await waitFor(
      async () => (await db.current.pool.query(`SELECT blocked_verdict FROM queue_ready WHERE run_id = $1 AND blocked_on IS NOT NULL`, [runId])).rows[0]?.blocked_verdict as string | undefined,
      { what: 'the entry set aside' },
    );
    polling.abort();
    await poll;
    await waitFor(async () => (await db.current.pool.query(`SELECT now() - blocked_at >= interval '50 milliseconds' AS long FROM queue_ready WHERE run_id = $1`, [runId])).rows[0].long, { what: 'a measurable time set aside' });
    const gpu = await new TestRunner(server.url).register(registration, { labels: ['gpu'] });
    await runOne(0, gpu);
    await waitFor(() => receiver.spans.some((s) => s.traceId === traceId && s.name === 'opschain.queue'), { timeoutMs: 30_000, what: 'the queue span' });
    const queue = receiver.spans.find((s) => s.traceId === traceId && s.name === 'opschain.queue')!;
    expect(queue.attributes['opschain.queue.verdicts']).toEqual([blocked]);
    const waited = queue.attributes[`opschain.queue.verdict.${blocked}.wait_ms`] as number;
    expect(waited).toBeGreaterThanOrEqual(50);
    expect(waited).toBeLessThanOrEqual(queue.attributes['opschain.queue.wait_ms'] as number);
    expect(queue.attributes['opschain.queue.offers']).toBe(1);
  });

  /** Takes one offer and acknowledges it: the step is running on `by`. */
  async function startOne(by = runner): Promise<{ step_id: number; token: string }> {
    const offered = await by.acquire({ wait_ms: 10_000 });
    expect(offered.status).toBe(200);
    const lease = { step_id: offered.body.offers[0].step_id, token: offered.body.offers[0].token };
    expect((await by.call('ack', { leases: [lease] })).body.results[0]).toMatchObject({ ok: true });
    return lease;
  }

  const spansOf = (traceId: string) => receiver.spans.filter((s) => s.traceId === traceId);
  const childOf = (spans: ReceivedSpan[], parent: ReceivedSpan, name: string) => spans.find((s) => s.parentSpanId === parent.spanId && s.name === name);

  it('a run cancelled from the store (no exporter there) is sent by the replica: its span and its running attempt\'s end cancelled, once', async () => {
    const { id: runId, traceId } = await submit({ name: 'to-cancel', steps: { first: { run: 'sleep 60' }, second: { run: 'true', needs: ['first'] } } });
    await startOne();
    // As `opschain runs cancel` does with the store's URL: this process exports nothing.
    expect(await runCancel(db.current.pool, runId, { actor: 'alice' })).toMatchObject({ cancelled: true, revoked: 1 });
    await waitFor(() => spansOf(traceId).some(isRun) && spansOf(traceId).some((s) => s.name === 'opschain.execute'), { timeoutMs: 30_000, what: 'the cancelled run\'s spans' });
    const spans = spansOf(traceId);
    const run = spans.find(isRun)!;
    expect(run).toMatchObject({ spanId: runSpanId(traceId, runId, 0), status: { code: 2, message: 'cancelled by alice' } });
    expect(run.attributes).toMatchObject({ 'cicd.pipeline.result': 'cancellation', 'opschain.run.status': 'cancelled' });
    const attempts = spans.filter((s) => s.parentSpanId === run.spanId);
    // The step that never started has no attempt span.
    expect(attempts.map((s) => s.attributes['cicd.pipeline.task.name'])).toEqual(['first']);
    expect(attempts[0]).toMatchObject({ status: { code: 2, message: 'cancelled by alice' } });
    expect(attempts[0].attributes['cicd.pipeline.task.run.result']).toBe('cancellation');
    expect(childOf(spans, attempts[0], 'opschain.execute')!.attributes['cicd.pipeline.task.run.result']).toBe('cancellation');
    // Claimed once and forgotten once sent: another pass (here or on another replica), even past
    // every grace, sends nothing.
    await tracing.flush();
    await waitFor(async () => Number((await db.current.pool.query(`SELECT count(*) AS n FROM trace_unsent`)).rows[0].n) === 0, { what: 'the spans owed forgotten' });
    const later = (await db.current.pool.query(`SELECT now() + interval '1 hour' AS t`)).rows[0].t as Date;
    expect(await tracing.sendUnsent({ now: later })).toBe(0);
    await tracing.flush();
    expect(spansOf(traceId)).toHaveLength(spans.length);
  });

  it('a cancelled run retried at once keeps its cancelled round\'s spans: round 0 cancelled with the attempt it stopped, round 1 its own', async () => {
    const { id: runId, traceId } = await submit({ name: 'cancel-then-retry', steps: { first: { run: 'sleep 60' } } });
    const stopped = await startOne();
    expect(await runCancel(db.current.pool, runId, { actor: 'carol' })).toMatchObject({ cancelled: true, revoked: 1 });
    // At once, well within the 2 s before the replica's pass over spans owed sends the cancelled
    // round's: the retry reopens the run (round 1) and sends the stopped step back to the queue.
    expect(await runRetry(db.current.pool, runId, { actor: 'carol' })).toMatchObject({ status: 'running', retried: [{ name: 'first', attempt: 2 }] });
    const again = await runOne();
    expect(again.step_id).toBe(stopped.step_id);
    const runs = () => spansOf(traceId).filter(isRun);
    const attempts = () => spansOf(traceId).filter((s) => s.attributes['cicd.pipeline.task.name'] === 'first');
    await waitFor(() => runs().length === 2 && attempts().length === 2, { timeoutMs: 30_000, what: 'both rounds\' spans' });
    const spans = spansOf(traceId);
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
    const round0 = runs().find((s) => s.spanId === runSpanId(traceId, runId, 0))!;
    const round1 = runs().find((s) => s.spanId === runSpanId(traceId, runId, 1))!;
    expect(round0).toMatchObject({ status: { code: 2, message: 'cancelled by carol' } });
    expect(round0.attributes).toMatchObject({ 'cicd.pipeline.result': 'cancellation', 'opschain.run.round': 0 });
    expect(round1).toMatchObject({ parentSpanId: round0.spanId, status: { code: 1 } });
    expect(round1.attributes).toMatchObject({ 'cicd.pipeline.result': 'success', 'opschain.run.round': 1 });
    const [a1, a2] = [1, 2].map((n) => attempts().find((s) => s.spanId === attemptSpanId(traceId, stopped.step_id, n))!);
    expect(a1).toMatchObject({ parentSpanId: round0.spanId, status: { code: 2, message: 'cancelled by carol' } });
    expect(a1.attributes['cicd.pipeline.task.run.result']).toBe('cancellation');
    expect(a2).toMatchObject({ parentSpanId: round1.spanId, status: { code: 1 } });
    // The cancelled attempt ended before the retry's began.
    expect(a1.endMs).toBeLessThanOrEqual(a2.startMs);
  });

  it('a timed-out attempt ends with status timeout; a lost runner\'s with runner_lost, on its lease span too', async () => {
    const timed = await submit({ name: 'times-out', steps: { only: { run: 'sleep 60', timeout: '1s' } } });
    const lease = await startOne();
    // What the runner agent reports when it kills a step at its timeout.
    expect((await runner.call('complete', { completions: [{ ...lease, exit_code: null, cause: 'timed out after 1s' }] })).body.results[0]).toMatchObject({ ok: true });
    await waitFor(() => spansOf(timed.traceId).some(isRun), { timeoutMs: 30_000, what: 'the timed-out run\'s spans' });
    const attempt = spansOf(timed.traceId).find((s) => s.attributes['cicd.pipeline.task.name'] === 'only')!;
    expect(attempt).toMatchObject({ status: { code: 2, message: 'timed out after 1s' } });
    expect(attempt.attributes['cicd.pipeline.task.run.result']).toBe('timeout');

    const lost = await submit({ name: 'loses-runner', steps: { only: { run: 'sleep 60' } } });
    await startOne();
    // The runner goes silent: no renewal, so the expiry sweep declares it lost after the lease's 4 s.
    await waitFor(() => spansOf(lost.traceId).some(isRun), { timeoutMs: 60_000, what: 'the lost runner\'s run spans' });
    const spans = spansOf(lost.traceId);
    const lostAttempt = spans.find((s) => s.attributes['cicd.pipeline.task.name'] === 'only')!;
    expect(lostAttempt.status.code).toBe(2);
    expect(lostAttempt.attributes).toMatchObject({ 'opschain.attempt.event': 'runner_lost', 'cicd.pipeline.task.run.result': 'error' });
    expect(childOf(spans, lostAttempt, 'opschain.lease')!.status).toEqual({ code: 2, message: 'runner_lost' });
  });

  it('a run submitted by hand links to nothing', async () => {
    const { id, traceId } = await submit({ name: 'by-hand', steps: { only: { run: 'true' } } });
    await runOne();
    await waitFor(() => receiver.spans.some((s) => s.traceId === traceId && isRun(s)), { timeoutMs: 30_000, what: 'the run span' });
    expect(receiver.spans.find((s) => s.traceId === traceId && isRun(s))).toMatchObject({ spanId: runSpanId(traceId, id, 0), links: [] });
  });
});

describe('an offer taken back from a dead replica', { timeout: 120_000 }, () => {
  const db = useTestDatabase();
  const receiver = new OtlpReceiver();
  const servers: ServerHandle[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop().catch(() => {})));
    await receiver.stop();
  });

  async function replica(tracing: RunTracing): Promise<ServerHandle> {
    const s = await startTestServer(db.current.url, { config: { tracingEndpoint: receiver.url }, plan: { tracing, ops: true, dispatch: { hooks: tracedHooks(orchestratorHooks, tracing) } } });
    servers.push(s);
    return s;
  }

  it('is an attempt span of its own whose queue and lease spans have the store\'s times; the next attempt follows in the trace', async () => {
    await receiver.start();
    const a = await replica(new RunTracing());
    const tracingB = new RunTracing();
    const b = await replica(tracingB);
    const registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 't' })).secret;
    const token = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci', scope: 'runs' })).secret;
    const viaA = await new TestRunner(a.url).register(registration);
    const res = await fetch(`${a.url}/api/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ file: JSON.stringify({ name: 'reclaimed', steps: { only: { run: 'true' } } }) }),
    });
    const { id: runId, traceId } = (await res.json()) as { id: number; traceId: string };
    const offered = await viaA.acquire({ wait_ms: 10_000 });
    const offer = offered.body.offers[0];
    const held = (await db.current.pool.query(`SELECT ready_at, delivered_at, token, holder FROM step_leases WHERE step_id = $1`, [offer.step_id])).rows[0];
    expect(held.holder).toBe(a.replica.replicaId);
    // a dies before the runner acknowledged the offer; b takes the claim back as a new attempt.
    servers.splice(servers.indexOf(a), 1);
    await a.stop();
    const reclaimed = await reclaimDeadPeers({
      pool: db.current.pool,
      replicaId: b.replica.replicaId,
      timing: { tickMs: 5_000, stalenessMs: 15_000, shardTtlMs: 15_000, leaderTtlMs: 15_000 },
      hooks: tracedHooks(orchestratorHooks, tracingB),
    });
    expect(reclaimed).toMatchObject([{ stepId: offer.step_id, attempt: 1, requeuedAttempt: 2, exposed: true }]);
    const viaB = Object.assign(new TestRunner(b.url), { credential: viaA.credential, runnerId: viaA.runnerId });
    const again = (await viaB.acquire({ wait_ms: 10_000 })).body.offers[0];
    expect(again).toMatchObject({ step_id: offer.step_id, attempt: 2 });
    const lease = { step_id: again.step_id, token: again.token };
    expect((await viaB.call('ack', { leases: [lease] })).body.results[0]).toMatchObject({ ok: true });
    expect((await viaB.call('complete', { completions: [{ ...lease, exit_code: 0 }] })).body.results[0]).toMatchObject({ ok: true });
    await waitFor(() => receiver.spans.some((s) => s.traceId === traceId && s.name === 'RUN reclaimed'), { timeoutMs: 30_000, what: 'the run span' });
    servers.splice(0);
    await b.stop();

    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
    const run = spans.find((s) => s.spanId === runSpanId(traceId, runId, 0))!;
    const first = spans.find((s) => s.spanId === attemptSpanId(traceId, offer.step_id, 1))!;
    const second = spans.find((s) => s.spanId === attemptSpanId(traceId, offer.step_id, 2))!;
    for (const s of [first, second]) expect(s.parentSpanId).toBe(run.spanId);
    expect(first.attributes).toMatchObject({ 'opschain.attempt.requeued': true, 'opschain.attempt': 1 });
    expect(first.status).toMatchObject({ code: 2, message: `replica ${a.replica.replicaId} lost before the runner acked` });
    const children = spans.filter((s) => s.parentSpanId === first.spanId);
    // Never acknowledged: a wait in the queue and a lease, no execution.
    expect(children.map((s) => s.name).sort()).toEqual(['opschain.lease', 'opschain.queue']);
    const queue = children.find((s) => s.name === 'opschain.queue')!;
    const leaseSpan = children.find((s) => s.name === 'opschain.lease')!;
    expect(queue.startMs).toBe(held.ready_at.getTime());
    expect(queue.endMs).toBe(held.delivered_at.getTime());
    expect(leaseSpan.startMs).toBe(held.delivered_at.getTime());
    expect(leaseSpan.endMs).toBeGreaterThanOrEqual(leaseSpan.startMs);
    expect(leaseSpan.endMs).toBeLessThanOrEqual(second.endMs);
    expect(leaseSpan.attributes).toMatchObject({ 'opschain.lease.token': String(held.token), 'opschain.lease.replica': a.replica.replicaId, 'cicd.worker.id': viaA.runnerId });
    expect(first.startMs).toBe(held.ready_at.getTime());
    // The next attempt's lease was delivered by b after the reclaim.
    expect(spans.find((s) => s.parentSpanId === second.spanId && s.name === 'opschain.lease')!.attributes['opschain.lease.replica']).toBe(b.replica.replicaId);
  });
});
