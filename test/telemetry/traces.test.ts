import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { attemptSpanId, runSpanId } from '../../src/core/trace-ids.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerHandle } from '../../src/server.js';
import { RunTracing, tracedHooks } from '../../src/telemetry/run-tracing.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';
import { Fleet } from '../runner/e2e-support.js';

// The SDK's batch processor exports every 5 s by default; the receiver is waited on either way.
process.env.OTEL_BSP_SCHEDULE_DELAY = '200';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';

const isAttempt = (s: ReceivedSpan) => s.name.startsWith('RUN ') && s.attributes['cicd.pipeline.task.name'] !== undefined;
const isRun = (s: ReceivedSpan) => s.name.startsWith('RUN ') && s.attributes['cicd.pipeline.task.name'] === undefined;

async function api(base: string, token: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

// Real processes on a shared machine: generous bounds, conditions not timings.
describe('a run is one OpenTelemetry trace', { timeout: 150_000 }, () => {
  const db = useTestDatabase();
  const receiver = new OtlpReceiver();
  let fleet: Fleet;
  let token: string;
  beforeAll(async () => {
    await receiver.start();
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer({ leaseTtlMs: 6_000, config: { tracingEndpoint: receiver.url } });
    token = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci', scope: 'runs' })).secret;
  });
  afterAll(async () => {
    await fleet?.stopAll();
    fleet?.cleanup();
    await receiver.stop();
  });

  it('a diamond with a retried step, joined to the caller: one trace, parentage, attributes, TRACEPARENT in each step', async () => {
    const runner = fleet.runner('traced', ['--max-parallel-steps', '2']);
    await fleet.ready(runner);
    const seen = fleet.path('traceparents');
    const mark = fleet.path('b-failed-once');
    const log = `echo "$OPSCHAIN_STEP $OPSCHAIN_ATTEMPT $TRACEPARENT" >> "${seen}"`;
    const definition = {
      name: 'traced-diamond',
      steps: {
        a: { run: log },
        // b fails on its first attempt only: the retry's attempt 2 succeeds.
        b: { run: `${log}; if [ -f "${mark}" ]; then true; else touch "${mark}"; exit 3; fi`, needs: ['a'] },
        c: { run: log, needs: ['a'] },
        d: { run: log, needs: ['b', 'c'] },
      },
    };
    // Through the HTTP API with the caller's trace in the W3C header, as a CI job would send it.
    const submitted = await api(fleet.servers[0].url, token, '/api/runs', { file: JSON.stringify(definition) }, { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    expect(submitted.status).toBe(200);
    const runId: number = submitted.body.id;
    expect(submitted.body.traceId).toBe(CALLER_TRACE);
    expect(await fleet.runDone(runId)).toMatchObject({ status: 'failed' });
    const retried = await api(fleet.servers[0].url, token, `/api/runs/${runId}/retry`, {});
    expect(retried.status).toBe(200);
    expect(await fleet.runDone(runId)).toMatchObject({ status: 'succeeded' });

    // The caller's trace is this run's alone here.
    const mine = () => receiver.spans.filter((s) => s.traceId === CALLER_TRACE);
    // Two rounds (the failed one and the retried one) and five attempts: a, b, c, b again, d.
    await waitFor(() => mine().filter(isRun).length === 2 && mine().filter(isAttempt).length === 5, { timeoutMs: 30_000, what: 'the run\'s spans at the receiver' });
    const spans = mine();
    expect(receiver.refused).toEqual([]);
    expect(new Set(spans.filter((s) => s.name.startsWith('RUN ')).map((s) => s.attributes['cicd.pipeline.run.id']))).toEqual(new Set([String(runId)]));
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);

    const [round0, round1] = spans.filter(isRun).sort((x, y) => Number(x.attributes['opschain.run.round']) - Number(y.attributes['opschain.run.round']));
    expect(round0).toMatchObject({ name: 'RUN traced-diamond', spanId: runSpanId(CALLER_TRACE, runId, 0), parentSpanId: CALLER_SPAN, status: { code: 2 } });
    expect(round0.attributes).toMatchObject({ 'cicd.pipeline.name': 'traced-diamond', 'cicd.pipeline.result': 'failure', 'opschain.run.round': 0 });
    expect(round1).toMatchObject({ spanId: runSpanId(CALLER_TRACE, runId, 1), parentSpanId: round0.spanId, status: { code: 1 } });
    expect(round1.attributes).toMatchObject({ 'cicd.pipeline.result': 'success', 'opschain.run.round': 1 });

    const attempt = (step: string, n: number) => {
      const found = spans.filter((s) => isAttempt(s) && s.attributes['cicd.pipeline.task.name'] === step && s.attributes['opschain.attempt'] === n);
      expect(found, `${step} attempt ${n}`).toHaveLength(1);
      return found[0];
    };
    const steps = { a: attempt('a', 1), b1: attempt('b', 1), c: attempt('c', 1), b2: attempt('b', 2), d: attempt('d', 1) };
    for (const s of [steps.a, steps.b1, steps.c]) expect(s.parentSpanId).toBe(round0.spanId);
    for (const s of [steps.b2, steps.d]) expect(s.parentSpanId).toBe(round1.spanId);
    expect(steps.b1.status.code).toBe(2);
    expect(steps.b1.attributes['cicd.pipeline.task.run.result']).toBe('failure');
    expect(steps.b2.attributes['cicd.pipeline.task.run.result']).toBe('success');
    // d starts after both b's retry and c ended: its wait in the queue begins after them.
    expect(steps.d.startMs).toBeGreaterThanOrEqual(Math.max(steps.b2.endMs, steps.c.endMs) - 1);

    const runnerName = (await db.current.pool.query(`SELECT name FROM runners`)).rows[0].name;
    for (const s of Object.values(steps)) {
      expect(s.spanId).toBe(attemptSpanId(CALLER_TRACE, Number(s.attributes['opschain.step.id']), Number(s.attributes['opschain.attempt'])));
      const children = spans.filter((c) => c.parentSpanId === s.spanId);
      expect(children.map((c) => c.name).sort()).toEqual(['opschain.execute', 'opschain.lease', 'opschain.queue']);
      const byName = Object.fromEntries(children.map((c) => [c.name, c]));
      expect(byName['opschain.queue'].attributes['opschain.queue.lane']).toBe('bulk');
      expect(byName['opschain.lease'].attributes).toMatchObject({ 'cicd.worker.name': runnerName, 'opschain.lease.replica': fleet.servers[0].replica.replicaId });
      expect(byName['opschain.execute'].attributes['process.exit.code']).toBe(s === steps.b1 ? 3 : 0);
      // The children sit inside their attempt, one after the other.
      expect(byName['opschain.queue'].startMs).toBeGreaterThanOrEqual(s.startMs);
      expect(byName['opschain.lease'].startMs).toBeGreaterThanOrEqual(byName['opschain.queue'].endMs);
      expect(byName['opschain.execute'].endMs).toBeLessThanOrEqual(s.endMs);
    }
    expect(spans).toHaveLength(2 + 5 * 4);
    // One trace: nothing this run emitted landed outside the caller's trace.
    expect(receiver.spans).toHaveLength(spans.length);

    // Each step ran under its own attempt's span, sampled.
    const lines = fleet.lines('traceparents').map((l) => l.split(' '));
    expect(lines.map(([step, n]) => `${step}${n}`).sort()).toEqual(['a1', 'b1', 'b2', 'c1', 'd1']);
    for (const [step, n, traceparent] of lines) {
      const s = step === 'b' ? (n === '1' ? steps.b1 : steps.b2) : steps[step as 'a' | 'c' | 'd'];
      expect(traceparent).toBe(`00-${CALLER_TRACE}-${s.spanId}-01`);
    }
    // runs show names the trace.
    const shown = await fetch(`${fleet.servers[0].url}/api/runs/${runId}`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await shown.json()) as { traceId: string }).traceId).toBe(CALLER_TRACE);
  });
});

describe('a step delivered by one replica and completed through another', { timeout: 120_000 }, () => {
  const db = useTestDatabase();
  const receiver = new OtlpReceiver();
  const servers: ServerHandle[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop().catch(() => {})));
    await receiver.stop();
  });

  /** A replica with traces on and no coordination: each owns every shard, as a lone replica does. */
  async function replica(): Promise<ServerHandle> {
    const tracing = new RunTracing();
    const hooks = tracedHooks(orchestratorHooks, tracing);
    const s = await startTestServer(db.current.url, { config: { tracingEndpoint: receiver.url }, plan: { tracing, ops: true, dispatch: { hooks, ownExpiryLoop: false } } });
    servers.push(s);
    return s;
  }

  it('is still one trace, each span emitted once, by the replica that recorded the end', async () => {
    await receiver.start();
    const a = await replica();
    const b = await replica();
    const registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 't' })).secret;
    const token = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci', scope: 'runs' })).secret;
    const viaA = await new TestRunner(a.url).register(registration);
    const submitted = await api(a.url, token, '/api/runs', { file: JSON.stringify({ name: 'failover', steps: { only: { run: 'true' } } }) });
    expect(submitted.status).toBe(200);
    const runId: number = submitted.body.id;
    const traceId: string = submitted.body.traceId;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    const offered = await viaA.acquire({ wait_ms: 10_000 });
    expect(offered.status).toBe(200);
    const offer = offered.body.offers[0];
    expect(offer.traceparent).toBe(`00-${traceId}-${attemptSpanId(traceId, offer.step_id, 1)}-01`);
    // Replica a goes away after the delivery; the runner carries on through b.
    servers.splice(servers.indexOf(a), 1);
    await a.stop();
    const viaB = Object.assign(new TestRunner(b.url), { credential: viaA.credential, runnerId: viaA.runnerId });
    const lease = { step_id: offer.step_id, token: offer.token };
    expect((await viaB.call('ack', { leases: [lease] })).body.results[0]).toMatchObject({ ok: true });
    expect((await viaB.call('renew', { leases: [lease] })).body.results[0]).toMatchObject({ ok: true });
    expect((await viaB.call('complete', { completions: [{ ...lease, exit_code: 0 }] })).body.results[0]).toMatchObject({ ok: true });
    // A repeat of the completion (a runner retrying an answer it lost) is answered ok and emits nothing more.
    expect((await viaB.call('complete', { completions: [{ ...lease, exit_code: 0 }] })).body.results[0]).toMatchObject({ ok: true });
    await waitFor(async () => (await db.current.pool.query(`SELECT 1 FROM runs WHERE id = $1 AND status = 'succeeded'`, [runId])).rows[0], { what: 'the run to succeed' });

    const mine = () => receiver.spans.filter((s) => s.traceId === traceId);
    await waitFor(() => mine().some(isRun) && mine().some(isAttempt), { timeoutMs: 30_000, what: 'the run\'s spans at the receiver' });
    // Whatever is still buffered goes out at b's stop: after it, every span there is to see.
    servers.splice(0);
    await b.stop();
    const spans = mine();
    expect(receiver.refused).toEqual([]);
    expect(spans.map((s) => s.name).sort()).toEqual(['RUN failover', 'RUN only', 'opschain.execute', 'opschain.lease', 'opschain.queue']);
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
    // Emitted by b, which recorded the end; the lease span names a, which delivered it.
    expect(new Set(spans.map((s) => s.resource['service.instance.id']))).toEqual(new Set([b.replica.replicaId]));
    expect(spans.find((s) => s.name === 'opschain.lease')!.attributes).toMatchObject({ 'opschain.lease.replica': a.replica.replicaId, 'opschain.lease.renewals': 1 });
    const run = spans.find(isRun)!;
    expect(run).toMatchObject({ spanId: runSpanId(traceId, runId, 0), parentSpanId: '' });
    expect(spans.find(isAttempt)!).toMatchObject({ spanId: offer.traceparent.split('-')[2], parentSpanId: run.spanId });
  });
});
