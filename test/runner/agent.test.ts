import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { RunnerAgent, type StepEvent } from '../../src/runner/agent.js';
import { CredentialInvalidError, RunnerClient } from '../../src/runner/client.js';
import { waitFor } from '../support/db.js';
import { alive } from './process-state.js';
import { FakeRunnerApi } from './fake-runner-api.js';

const log = createLogger(process.env.OPSCHAIN_TEST_LOG ?? 'silent', { pretty: false });


describe('runner agent', () => {
  const root = mkdtempSync(join(tmpdir(), 'opschain-agent-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  let api: FakeRunnerApi;
  let agent: RunnerAgent | undefined;
  let running: Promise<void> | undefined;

  const RUNNER_ENV = {
    PATH: process.env.PATH,
    LANG: 'C.UTF-8',
    OPSCHAIN_REGISTRATION_TOKEN: 'ocreg_secret',
    OPSCHAIN_HOME: '/secret/home',
    OPSCHAIN_DATABASE_URL: 'postgres://u:pw@h/db',
    DATABASE_URL: 'postgres://u:pw@h/db',
    PGPASSWORD: 'pw',
    SOME_CLOUD_SECRET: 'shh',
    AWS_REGION: 'eu-west-1',
    FROM_RUNNER: 'r',
  };

  async function startAgent(opts: { maxParallelSteps?: number; graceMs?: number; once?: boolean } = {}) {
    api = new FakeRunnerApi();
    await api.start();
    const client = new RunnerClient({ servers: [api.url], credential: 'ocrnr_fake', log, backoff: { baseMs: 1, maxMs: 5 } });
    const workDir = mkdtempSync(join(root, 'work-'));
    agent = new RunnerAgent({ client, log, workDir, maxParallelSteps: opts.maxParallelSteps ?? 1, graceMs: opts.graceMs ?? 30_000, killGraceMs: 200, once: opts.once, pollWaitMs: 500, baseEnv: RUNNER_ENV, passEnv: ['FROM_RUNNER', 'AWS_*', 'OPSCHAIN_*'] });
    const finished: StepEvent[] = [];
    agent.events.on('step:finished', (e: StepEvent) => finished.push(e));
    running = agent.run();
    running.catch(() => {});
    return { workDir, finished };
  }

  afterEach(async () => {
    if (agent) {
      agent.stop();
      agent.stop();
      await running?.catch(() => {});
    }
    agent = undefined;
    await api?.stop();
  });

  it('acks an offer, runs it in its own directory with the step env, streams its output and completes with the exit code', async () => {
    const { workDir, finished } = await startAgent();
    api.offer({ step_id: 5, run_id: 9, attempt: 2, step: 'build', command: 'echo "$OPSCHAIN_RUN_ID/$OPSCHAIN_STEP/$OPSCHAIN_ATTEMPT $REGION $FROM_RUNNER token=${OPSCHAIN_REGISTRATION_TOKEN:-none}"; pwd; echo warn >&2; exit 4', env: { REGION: 'eu' } });
    await waitFor(() => api.completions.length === 1, { what: 'completion' });
    expect(api.completions[0]).toEqual({ step_id: 5, token: 't5', exit_code: 4 });
    expect(api.callsTo('ack')[0].body).toEqual({ leases: [{ step_id: 5, token: 't5' }] });
    const text = api.logText(5);
    expect(text).toContain('9/build/2 eu r token=none\n');
    expect(text).toContain(join(workDir, 'run-9', 'build.2'));
    expect(text).toContain('warn\n');
    await waitFor(() => finished.length === 1);
    expect(finished[0].outcome).toBe('completed');
    expect(existsSync(join(workDir, 'run-9'))).toBe(false);
  });

  it('writes a webhook-started run\'s payload to the file $OPSCHAIN_WEBHOOK_PAYLOAD names, in the step\'s work dir', async () => {
    const { workDir } = await startAgent();
    api.offer({ step_id: 8, run_id: 4, step: 'deploy', command: 'echo "$OPSCHAIN_WEBHOOK_PAYLOAD"; cat "$OPSCHAIN_WEBHOOK_PAYLOAD"', webhook_payload: '{"ref":"main"}' });
    await waitFor(() => api.completions.length === 1, { what: 'completion' });
    expect(api.completions[0].exit_code).toBe(0);
    expect(api.logText(8)).toBe(`${join(workDir, 'run-4', 'deploy.1', 'opschain-webhook-payload')}\n{"ref":"main"}`);
  });

  it('hands a step only the documented environment and what --pass-env allows, never opschain\'s own', async () => {
    await startAgent();
    api.offer({ step_id: 6, run_id: 3, step: 'env', command: 'env | cut -d= -f1 | sort', env: { REGION: 'eu' } });
    await waitFor(() => api.completions.length === 1, { what: 'completion' });
    const names = api.logText(6).split('\n').filter((n) => n && !['PWD', 'OLDPWD', 'SHLVL', '_'].includes(n));
    expect(names).toEqual(['AWS_REGION', 'FROM_RUNNER', 'LANG', 'OPSCHAIN_ATTEMPT', 'OPSCHAIN_RUN_ID', 'OPSCHAIN_STEP', 'OPSCHAIN_STEP_COOKIE', 'OPSCHAIN_WORK_DIR', 'PATH', 'REGION', 'SHELL']);
  });

  it('acks each offer before it starts it (an offer an older server delivered acked needs none); a server that refuses `fresh` gets polls without it', async () => {
    await startAgent();
    await waitFor(() => api.callsTo('acquire').length > 0);
    expect(api.callsTo('acquire')[0].body).toMatchObject({ fresh: true });
    expect(api.callsTo('acquire')[0].body.ack_on_delivery).toBeUndefined();
    api.offer({ step_id: 32 });
    await waitFor(() => api.completions.length === 1, { what: 'completion of the offer' });
    expect(api.callsTo('ack').map((c) => c.body)).toEqual([{ leases: [{ step_id: 32, token: 't32' }] }]);
    api.offer({ step_id: 31, acked: true });
    await waitFor(() => api.completions.length === 2, { what: 'completion of the offer delivered acked' });
    expect(api.callsTo('ack')).toHaveLength(1);
    // A server that predates the field refuses it: the agent drops it.
    api.failNext('acquire', { status: 400, error: 'body must NOT have additional properties' });
    await waitFor(() => api.callsTo('acquire').some((c) => c.body.fresh === undefined), { what: 'a poll without fresh' });
  });

  it('carries a finished step\'s result on the poll for its slot; a server that refuses the field gets a complete call', async () => {
    const { finished } = await startAgent();
    api.offer({ step_id: 41, acked: true, command: 'exit 4' });
    await waitFor(() => finished.length === 1, { what: 'step 41 reported' });
    expect(finished[0].outcome).toBe('completed');
    const carrying = api.callsTo('acquire').filter((c) => c.body.completions);
    expect(carrying.map((c) => c.body.completions)).toEqual([[{ step_id: 41, token: 't41', exit_code: 4 }]]);
    expect(api.callsTo('complete')).toHaveLength(0);
    expect(api.completions).toEqual([{ step_id: 41, token: 't41', exit_code: 4 }]);
    // A server that predates complete-and-acquire: the result goes out on its own call, once.
    api.refuseCarried = true;
    const polls = api.callsTo('acquire').length;
    api.offer({ step_id: 42, acked: true });
    await waitFor(() => finished.length === 2, { what: 'step 42 reported' });
    expect(finished[1].outcome).toBe('completed');
    expect(api.callsTo('complete').map((c) => c.body)).toEqual([{ completions: [{ step_id: 42, token: 't42', exit_code: 0 }] }]);
    expect(api.callsTo('acquire').slice(polls).filter((c) => c.body.completions).length).toBe(1);
    expect(api.completions.map((c) => c.step_id)).toEqual([41, 42]);
  });

  it('asks for as many offers as it has free slots and runs them side by side', async () => {
    await startAgent({ maxParallelSteps: 3 });
    await waitFor(() => api.callsTo('acquire').length > 0);
    expect(api.callsTo('acquire')[0].body.max_offers).toBe(3);
    const marker = join(root, `side-${Date.now()}`);
    api.offer(
      { step_id: 1, command: `touch ${marker}.1; while [ ! -e ${marker}.3 ]; do sleep 0.02; done` },
      { step_id: 2, command: `touch ${marker}.2; while [ ! -e ${marker}.3 ]; do sleep 0.02; done` },
      { step_id: 3, command: `while [ ! -e ${marker}.1 ] || [ ! -e ${marker}.2 ]; do sleep 0.02; done; touch ${marker}.3` },
    );
    await waitFor(() => api.completions.length === 3, { what: 'three completions' });
    expect(api.completions.every((c) => c.exit_code === 0)).toBe(true);
    expect(api.callsTo('ack')).toHaveLength(1);
  });

  it('while a run-scoped run is here, extra polls ask only for its steps, clamped to --max-parallel-steps, said once in its log', async () => {
    await startAgent({ maxParallelSteps: 2 });
    const marker = join(root, `scoped-${Date.now()}`);
    api.offer({ step_id: 21, run_id: 7, run_scope: true, max_parallel_steps: 3, command: `while [ ! -e ${marker} ]; do sleep 0.02; done` });
    await waitFor(() => agent!.running === 1, { what: 'scoped step running' });
    const before = api.callsTo('acquire').length;
    await waitFor(() => api.callsTo('acquire').slice(before).some((c) => c.body.only_run_id === 7), { what: 'a poll restricted to run 7' });
    const scoped = api.callsTo('acquire').slice(before).filter((c) => c.body.only_run_id === 7);
    expect(scoped.every((c) => c.body.max_offers === 1)).toBe(true);
    api.offer({ step_id: 22, run_id: 7, run_scope: true, max_parallel_steps: 3, command: `while [ ! -e ${marker} ]; do sleep 0.02; done` });
    await waitFor(() => agent!.running === 2, { what: 'second scoped step running' });
    writeFileSync(marker, '');
    await waitFor(() => api.completions.length === 2, { what: 'both completions' });
    const notes = [api.logText(21), api.logText(22)].join('').match(/the run allows 3 steps at once; this runner runs at most 2/g) ?? [];
    expect(notes).toHaveLength(1);
    // The run is gone from this runner: polls are unrestricted again.
    const after = api.callsTo('acquire').length;
    await waitFor(() => api.callsTo('acquire').slice(after).some((c) => c.body.only_run_id === undefined), { what: 'an unrestricted poll' });
  });

  it('renews on the offer cadence and kills the step when the lease is revoked', async () => {
    const { finished } = await startAgent();
    let pid = 0;
    agent!.events.on('step:started', (e: StepEvent) => (pid = e.pid!));
    api.offer({ step_id: 6, command: 'sleep 300', lease_ttl_ms: 900, renew_interval_ms: 60_000 });
    await waitFor(() => api.callsTo('renew').length >= 2, { what: 'renewals every 300ms' });
    expect(alive(pid)).toBe(true);
    api.revoked.add('t6');
    await waitFor(() => finished.length === 1, { what: 'step killed' });
    expect(finished[0].outcome).toBe('lost');
    expect(alive(pid)).toBe(false);
    expect(api.completions).toHaveLength(0);
  });

  it('enforces the step timeout and completes with the cause', async () => {
    await startAgent();
    api.offer({ step_id: 7, command: 'echo begin; sleep 300', timeout_ms: 300 });
    await waitFor(() => api.completions.length === 1, { what: 'timed-out completion' });
    expect(api.completions[0]).toEqual({ step_id: 7, token: 't7', exit_code: null, cause: 'timed out after 300ms' });
    await waitFor(() => api.logText(7).includes('timed out after 300ms'));
    expect(api.logText(7)).toMatch(/^begin\n/);
  });

  it('stop: no more polling, a step within the grace completes, one past it is killed and released', async () => {
    const { finished } = await startAgent({ maxParallelSteps: 2, graceMs: 3000 });
    const marker = join(root, `grace-${Date.now()}`);
    api.offer({ step_id: 1, command: `while [ ! -e ${marker} ]; do sleep 0.02; done; echo done` }, { step_id: 2, command: 'sleep 300' });
    await waitFor(() => agent!.running === 2);
    const polls = api.callsTo('acquire').length;
    agent!.stop();
    writeFileSync(marker, '');
    await running;
    expect(finished.map((f) => [f.stepId, f.outcome]).sort()).toEqual([[1, 'completed'], [2, 'released']]);
    expect(api.completions.map((c) => c.step_id)).toEqual([1]);
    expect(api.releases.map((r) => r.step_id)).toEqual([2]);
    expect(api.callsTo('acquire').length).toBeLessThanOrEqual(polls + 1);
  });

  it('credential invalid stops the runner with that error and kills its steps', async () => {
    const { finished } = await startAgent();
    api.offer({ step_id: 8, command: 'sleep 300', lease_ttl_ms: 900 });
    await waitFor(() => agent!.running === 1);
    api.credentialValid = false;
    await expect(running).rejects.toBeInstanceOf(CredentialInvalidError);
    expect(finished[0].outcome).toBe('abandoned');
  });

  it('--once takes one batch of work, runs it and returns', async () => {
    const { workDir } = await startAgent({ once: true });
    api.offer({ step_id: 9, command: 'echo once' });
    await running;
    expect(api.completions).toEqual([{ step_id: 9, token: 't9', exit_code: 0 }]);
    expect(readdirSync(workDir)).toEqual([]);
    agent = undefined;
  });
});
