import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SpanRecord } from '../../src/core/trace-spans.js';
import { createLogger } from '../../src/logger.js';
import type { OrchestratorHooks } from '../../src/orchestrator/contract.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { stepEnvironment } from '../../src/runner/step-env.js';
import { poolObserve, withTransaction } from '../../src/store/pool.js';
import { RunTracing, tracedHooks } from '../../src/telemetry/run-tracing.js';
import { useTestDatabase } from '../support/db.js';

const ROOT = join(import.meta.dirname, '..', '..');
const files = (dir: string): string[] =>
  readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : /\.tsx?$/.test(f) ? [p] : [];
  });

describe('traces off cost nothing', () => {
  it('the OpenTelemetry SDK is loaded only by a dynamic import, reached only with an endpoint configured', () => {
    const sources = [...files(join(ROOT, 'src')), ...files(join(ROOT, 'commands'))];
    // A static import (type-only aside) would load the SDK in every process.
    const staticSdk = sources.filter((f) => /^import (?!type )[^;]*from '@opentelemetry\//m.test(readFileSync(f, 'utf8'))).map((f) => relative(ROOT, f));
    expect(staticSdk).toEqual([]);
    const dynamicSdk = sources.filter((f) => /import\('@opentelemetry\//.test(readFileSync(f, 'utf8'))).map((f) => relative(ROOT, f));
    expect(dynamicSdk).toEqual(['src/telemetry/otlp-sink.ts']);
    // And the module holding it is itself imported only dynamically, by the tracing feature.
    const sinkImporters = sources.filter((f) => /otlp-sink\.js'/.test(readFileSync(f, 'utf8').replace(/^import type .*$/gm, ''))).map((f) => relative(ROOT, f));
    expect(sinkImporters).toEqual(['src/telemetry/feature.ts']);
    expect(readFileSync(join(ROOT, 'src/telemetry/feature.ts'), 'utf8')).toMatch(/if \(!settings\) return undefined;[\s\S]*await import\('\.\/otlp-sink\.js'\)/);
  });
});

describe("a step's TRACEPARENT", () => {
  const offer = { env: {}, run_id: 1, step: 'build', attempt: 2 };
  const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  it('is the offer\'s; the runner\'s own is not handed down', () => {
    expect(stepEnvironment({ runnerEnv: { TRACEPARENT: 'runner-own' }, passEnv: [], offer: { ...offer, traceparent: tp }, dir: '/w' }).TRACEPARENT).toBe(tp);
    expect(stepEnvironment({ runnerEnv: { TRACEPARENT: 'runner-own' }, passEnv: [], offer, dir: '/w' }).TRACEPARENT).toBeUndefined();
  });
});

describe("a step's end with traces off and on", () => {
  const db = useTestDatabase();

  it('traces off add no statement to the transaction that ends a step; on, one (the spans owed), and the spans come from it', async () => {
    const pool = db.current.pool;
    let statements = 0;
    poolObserve(pool, (seconds) => {
      if (seconds !== null) statements++;
    });
    /** Submits a one-step run, starts its step, and counts the statements of the transaction that ends it through `hooks`. */
    const endOne = async (hooks: OrchestratorHooks): Promise<{ runId: number; statements: number }> => {
      const { runId } = await runSubmit(pool, runFileLoad(JSON.stringify({ name: 'cost', steps: { only: { run: 'true' } } })), { actor: 'test' });
      const step = (await pool.query(`SELECT id, attempt FROM steps WHERE run_id = $1`, [runId])).rows[0];
      const stepId = Number(step.id);
      await withTransaction(pool, (c) => hooks.stepStarted(c, { stepId, attempt: step.attempt, runnerId: 'rnr_cost' }));
      statements = 0;
      await withTransaction(pool, (c) => hooks.stepsFinished(c, [{ stepId, runId, attempt: step.attempt, status: 'succeeded', exitCode: 0, cause: null, runnerId: 'rnr_cost' }]));
      return { runId, statements };
    };
    const plain = await endOne(orchestratorHooks);
    const off = await endOne(tracedHooks(orchestratorHooks, new RunTracing()));
    const on = new RunTracing();
    const emitted: SpanRecord[] = [];
    on.start({ sink: { emit: (batches) => batches.forEach((b) => emitted.push(...b.spans)), flush: async () => {}, shutdown: async () => {} }, sampler: { name: 'always_on', ratio: 1 }, log: createLogger('silent', { pretty: false }), pool });
    const traced = await endOne(tracedHooks(orchestratorHooks, on));
    expect(off.statements).toBe(plain.statements);
    expect(traced.statements).toBe(plain.statements + 1);
    /** The rows owed whose facts name the run (one per transaction that ended any of its attempts or its round). */
    const owed = async (runId: number) =>
      Number(
        (
          await pool.query(
            `SELECT count(*) AS n FROM trace_unsent u
              WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(u.facts->'ends') e JOIN steps s ON s.id = (e->>'stepId')::bigint WHERE s.run_id = $1)
                 OR u.facts->'runs' @> jsonb_build_array(jsonb_build_object('id', $1::bigint))`,
            [runId],
          )
        ).rows[0].n,
      );
    expect([await owed(plain.runId), await owed(off.runId)]).toEqual([0, 0]);
    await on.flush();
    expect(emitted.map((s) => s.name).sort()).toEqual(['RUN cost', 'RUN only', 'opschain.execute', 'opschain.lease']);
    // This sink never reports anything sent: the row (the step's attempt and the run's round, ended
    // in one transaction) stays owed, for a replica to send after its grace.
    expect(await owed(traced.runId)).toBe(1);
    await on.stop();
  });
});
