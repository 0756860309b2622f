import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { attemptSpanId, runSpanId } from '../../src/core/trace-ids.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { ServerHandle } from '../../src/server.js';
import { RESEND_AFTER_MS, RunTracing, tracedHooks } from '../../src/telemetry/run-tracing.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { CliProcess } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { OtlpReceiver } from '../support/otlp-receiver.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';

// The SDK's batch processor exports every 5 s by default; the receiver is waited on either way.
process.env.OTEL_BSP_SCHEDULE_DELAY = '200';

/**
 * The spans a replica owes are recorded in the store with the end they describe: when the replica
 * that ended an attempt cannot send its spans (killed before its exporter flushed, or its
 * collector unreachable), another replica sends them once their grace has passed, and once only.
 * The grace is passed by giving the claim a later time, not by waiting for it.
 */
describe('spans a replica could not send', { timeout: 120_000 }, () => {
  const db = useTestDatabase();
  const receiver = new OtlpReceiver();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-unsent-'));
  const servers: ServerHandle[] = [];
  const procs: CliProcess[] = [];
  afterEach(async () => {
    await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
    await Promise.all(servers.splice(0).map((s) => s.stop().catch(() => {})));
    await receiver.stop();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** An in-process replica with traces on, exporting to `endpoint`, without the dispatch plane's own expiry loop. */
  async function replica(endpoint: string): Promise<{ server: ServerHandle; tracing: RunTracing }> {
    const tracing = new RunTracing();
    const server = await startTestServer(db.current.url, { config: { tracingEndpoint: endpoint }, plan: { tracing, ops: true, dispatch: { hooks: tracedHooks(orchestratorHooks, tracing), ownExpiryLoop: false } } });
    servers.push(server);
    return { server, tracing };
  }

  /** Runs a one-step run to its end through `url`'s runner protocol; returns the run and its trace. */
  async function runThrough(url: string, name: string): Promise<{ runId: number; traceId: string; stepId: number }> {
    const registration = (await tokenCreate(db.current.pool, { kind: 'registration', name })).secret;
    const runner = await new TestRunner(url).register(registration);
    const { runId } = await runSubmit(db.current.pool, runFileLoad(JSON.stringify({ name, steps: { only: { run: 'true' } } })), { actor: 'test' });
    const offer = await waitFor(async () => (await runner.acquire({ wait_ms: 5_000 })).body?.offers?.[0], { timeoutMs: 60_000, what: 'the offer' });
    const lease = { step_id: offer.step_id, token: offer.token };
    expect((await runner.call('ack', { leases: [lease] })).body.results[0]).toMatchObject({ ok: true });
    expect((await runner.call('complete', { completions: [{ ...lease, exit_code: 0 }] })).body.results[0]).toMatchObject({ ok: true });
    await waitFor(async () => (await db.current.pool.query(`SELECT 1 FROM runs WHERE id = $1 AND status = 'succeeded'`, [runId])).rows[0], { what: 'the run to succeed' });
    const traceId: string = (await db.current.pool.query(`SELECT trace_id FROM runs WHERE id = $1`, [runId])).rows[0].trace_id;
    return { runId, traceId, stepId: offer.step_id };
  }

  /** What the rows owed hold of this run: its attempts and its rounds. */
  const owed = async (runId: number): Promise<string[]> =>
    (
      await db.current.pool.query(
        `SELECT 'attempt' AS kind FROM trace_unsent u, jsonb_array_elements(u.facts->'ends') e JOIN steps s ON s.id = (e->>'stepId')::bigint
          WHERE u.kind = 'ended' AND s.run_id = $1
         UNION ALL
         SELECT 'run' FROM trace_unsent u, jsonb_array_elements(u.facts->'runs') r WHERE u.kind = 'ended' AND (r->>'id')::bigint = $1
         ORDER BY 1`,
        [runId],
      )
    ).rows.map((r) => r.kind);
  const storeNowPlus = async (ms: number): Promise<Date> => (await db.current.pool.query(`SELECT now() + $1 * interval '1 millisecond' AS t`, [ms])).rows[0].t;

  /** The run's five spans, each once, sent by `by`. */
  function expectSentOnce(p: { traceId: string; runId: number; runName: string; stepId: number }, by: string): void {
    const { traceId, runId, stepId } = p;
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    expect(spans.map((s) => s.name).sort()).toEqual([`RUN ${p.runName}`, 'RUN only', 'opschain.execute', 'opschain.lease', 'opschain.queue'].sort());
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
    expect(new Set(spans.map((s) => s.resource['service.instance.id']))).toEqual(new Set([by]));
    const run = spans.find((s) => s.spanId === runSpanId(traceId, runId, 0))!;
    expect(run.attributes).toMatchObject({ 'cicd.pipeline.result': 'success' });
    const attempt = spans.find((s) => s.spanId === attemptSpanId(traceId, stepId, 1))!;
    expect(attempt.parentSpanId).toBe(run.spanId);
    expect(spans.filter((s) => s.parentSpanId === attempt.spanId)).toHaveLength(3);
  }

  it('killed (SIGKILL) before its exporter flushed: another replica sends its spans after the grace, once', async () => {
    await receiver.start();
    const home = join(dir, 'a');
    // A replica process whose batch processor would hold spans ten minutes before exporting them.
    const a = new CliProcess(['server', 'start', '--database-url', db.current.url, '--port', '0', '--home', home, '--log-level', 'info'], {
      OPSCHAIN_HOME: home,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });
    procs.push(a);
    const ready = await a.waitForOutput(/"url":"(http:[^"]+)","replica":"([^"]+)"[^\n]*opschain server ready/, 60_000);
    const { runId, traceId, stepId } = await runThrough(ready[1], 'sole');
    // The end's transaction recorded the spans owed: the attempt and the run's round.
    expect(await owed(runId)).toEqual(['attempt', 'run']);
    expect(receiver.spans.filter((s) => s.traceId === traceId)).toEqual([]);
    a.child.kill('SIGKILL');
    await a.waitExit();

    const { server: b, tracing } = await replica(receiver.url);
    // Within the grace nobody takes them: the replica that ended the attempt may still send them.
    expect(await tracing.sendUnsent()).toBe(0);
    const later = await storeNowPlus(RESEND_AFTER_MS + 1_000);
    // One row: the step's completion ended the attempt and the run in one transaction.
    expect(await tracing.sendUnsent({ now: later })).toBe(1);
    await tracing.flush();
    expectSentOnce({ traceId, runId, runName: 'sole', stepId }, b.replica.replicaId);
    // The lease span still names the replica that delivered it.
    expect(receiver.spans.find((s) => s.traceId === traceId && s.name === 'opschain.lease')!.attributes['opschain.lease.replica']).toBe(ready[2]);
    // Sent, so forgotten: no later pass (here or elsewhere) sends them again.
    expect(await owed(runId)).toEqual([]);
    expect(await tracing.sendUnsent({ now: await storeNowPlus(10 * RESEND_AFTER_MS) })).toBe(0);
    servers.splice(0);
    await b.stop();
    expect(receiver.spans.filter((s) => s.traceId === traceId)).toHaveLength(5);
  });

  it('whose collector was unreachable: the spans stay owed, and another replica sends them once', async () => {
    await receiver.start();
    // An endpoint nothing listens on: a receiver started and stopped again.
    const gone = await new OtlpReceiver().start();
    const unreachable = gone.url;
    await gone.stop();
    const a = await replica(unreachable);
    const b = await replica(receiver.url);
    const { runId, traceId, stepId } = await runThrough(a.server.url, 'unreachable');
    // a's exporter tried and failed: nothing reported sent, so the rows stay.
    await a.tracing.flush();
    expect(await owed(runId)).toEqual(['attempt', 'run']);
    const later = await storeNowPlus(RESEND_AFTER_MS + 1_000);
    expect(await b.tracing.sendUnsent({ now: later })).toBe(1);
    // A claim gives the claimer a grace of its own: a second replica claiming at once finds nothing.
    expect(await a.tracing.sendUnsent({ now: later })).toBe(0);
    await b.tracing.flush();
    expectSentOnce({ traceId, runId, runName: 'unreachable', stepId }, b.server.replica.replicaId);
    expect(await owed(runId)).toEqual([]);
  });
});
