import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { stepLogAppend } from '../../src/store/logs.js';
import { CliProcess, ROOT, runCli } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { complete, deliver, giveBack, registerRunner, runStep } from '../support/lifecycle.js';

const me = `cli:${userInfo().username}`;

describe('opschain runs', () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-runs-'));
  const procs: CliProcess[] = [];
  afterEach(async () => {
    await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cli = (args: string[], input?: string) => runCli([...args, '--database-url', db.current.url], {}, { input });
  const spawn = (args: string[]) => {
    const p = new CliProcess([...args, '--database-url', db.current.url]);
    procs.push(p);
    return p;
  };
  const submit = async (text: string) => (await runSubmit(db.current.pool, runFileLoad(text), { actor: me })).runId;
  const runCount = async () => (await db.current.pool.query(`SELECT count(*)::int AS n FROM runs`)).rows[0].n as number;

  it('submit prints the id; show --json gives the documented shape in dependency order', async () => {
    const r = await cli(['runs', 'submit', join(ROOT, 'examples', 'diamond.yaml')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^\d+\n$/);
    const id = Number(r.stdout);
    await registerRunner(db.current.pool, 'rnr_cli1', 'build-01');
    await complete(db.current.pool, await deliver(db.current.pool, { run: id, step: 'a', runnerId: 'rnr_cli1' }), { status: 'succeeded', runnerId: 'rnr_cli1' });
    const show = await cli(['runs', 'show', String(id), '--json']);
    expect(show.code).toBe(0);
    const view = JSON.parse(show.stdout);
    const time = expect.stringMatching(/^\d{4}-\d\d-\d\dT/);
    const step = (name: string, status: string, attempt: number, needs: string[], depth: number) => ({
      name, status, attempt, needs, depth, runnerId: null, runnerName: null, exitCode: null, cause: null, startedAt: null, finishedAt: null, durationMs: null, verdict: null,
    });
    const waiting = { code: 'waiting_for_tick', reason: 'waiting for a dispatch tick', satisfiable: true };
    expect(view).toEqual({
      id, name: 'diamond', project: 'default', target: null, scope: 'step', priority: 0, status: 'running', cause: null, createdBy: me,
      createdAt: time, finishedAt: null, durationMs: expect.any(Number), template: null, traceId: expect.stringMatching(/^[0-9a-f]{32}$/),
      steps: [
        { ...step('a', 'succeeded', 1, [], 0), runnerId: 'rnr_cli1', runnerName: 'build-01', exitCode: 0, startedAt: time, finishedAt: time, durationMs: expect.any(Number) },
        { ...step('b', 'ready', 1, ['a'], 1), verdict: waiting },
        { ...step('c', 'ready', 1, ['a'], 1), verdict: waiting },
        step('d', 'pending', 0, ['b', 'c'], 2),
      ],
    });
    const human = await cli(['runs', 'show', String(id)]);
    // Nothing is running: b and c wait in the queue, so the run reads queued, not running.
    expect(human.stdout).toMatch(new RegExp(`^run ${id} diamond \\(default\\): queued after`));
    expect(human.stdout).toMatch(/└─ d \(needs b, c\)/);
    expect(human.stdout).toMatch(/build-01/);
    expect(human.stdout).toMatch(/waiting for a dispatch tick/);
  });

  it('a bad file is refused whole: every problem on its own line, exit 2, nothing written', async () => {
    const before = await runCount();
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'name: bad\nsteps:\n  build: { run: make, timeout: soon }\n  deploy: { run: ./deploy, needs: [tset] }\n  a: { run: x, needs: [b] }\n  b: { run: x, needs: [a] }\n');
    const r = await cli(['runs', 'submit', file]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toEqual([
      'Error: run file refused (3 problems):',
      'steps.build.timeout: expected a duration like 10m, got "soon"',
      'steps.deploy.needs[0]: no step named "tset"',
      'steps: cycle a -> b -> a',
    ]);
    const j = await cli(['runs', 'submit', file, '--json']);
    expect(j.code).toBe(2);
    expect(JSON.parse(j.stdout)).toEqual({
      error: {
        code: 'invalid_run_file',
        message: 'run file refused (3 problems)',
        problems: [
          { path: 'steps.build.timeout', message: 'expected a duration like 10m, got "soon"' },
          { path: 'steps.deploy.needs[0]', message: 'no step named "tset"' },
          { path: 'steps', message: 'cycle a -> b -> a' },
        ],
      },
    });
    const missing = await cli(['runs', 'submit', join(dir, 'nope.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^Error: cannot read .*nope\.yaml: ENOENT/);
    expect(await runCount()).toBe(before);
  });

  it('submit - reads stdin and applies --set overrides', async () => {
    const r = await cli(['runs', 'submit', '-', '--set', 'priority=60', '--set', 'env.REGION=us-east-1', '--set', 'steps.build.run=make all', '--json'], JSON.stringify({ name: 'piped', env: { REGION: 'eu' }, steps: { build: { run: 'make' } } }));
    expect(r.code).toBe(0);
    const view = JSON.parse(r.stdout);
    expect(view).toMatchObject({ name: 'piped', priority: 60, status: 'running', steps: [{ name: 'build', status: 'ready', attempt: 1 }] });
    const { rows } = await db.current.pool.query(`SELECT s.command, s.env, r.definition FROM steps s JOIN runs r ON r.id = s.run_id WHERE r.id = $1`, [view.id]);
    expect(rows[0]).toEqual({ command: 'make all', env: { REGION: 'us-east-1' }, definition: { name: 'piped', priority: 60, env: { REGION: 'us-east-1' }, steps: { build: { run: 'make all' } } } });
  });

  it('an unknown run id is exit 3, a malformed one exit 2, each with one line', async () => {
    const r = await cli(['runs', 'show', '424242']);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('Error: no run with id 424242');
    const j = await cli(['runs', 'cancel', '424242', '--json']);
    expect(j.code).toBe(3);
    expect(JSON.parse(j.stdout)).toEqual({ error: { code: 'not_found', message: 'no run with id 424242' } });
    const bad = await cli(['runs', 'logs', 'abc']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe('Error: expected a run id (a positive number), got "abc"');
  });

  it('list filters by status and project, newest first, paged with --before', async () => {
    const ids: number[] = [];
    for (const name of ['l1', 'l2', 'l3']) ids.push(await submit(`name: ${name}\nproject: listing\nsteps:\n  a: { run: 'true' }\n`));
    await runStep(db.current.pool, ids[1], 'a');
    const page1 = JSON.parse((await cli(['runs', 'list', '--project', 'listing', '--limit', '2', '--json'])).stdout);
    expect(page1.runs.map((r: { id: number }) => r.id)).toEqual([ids[2], ids[1]]);
    expect(page1.next).toEqual({ before: ids[1] });
    expect(page1.runs[1]).toEqual({
      id: ids[1], name: 'l2', project: 'listing', target: null, status: 'succeeded', cause: null, createdBy: me,
      createdAt: expect.any(String), finishedAt: expect.any(String),
      steps: { total: 1, pending: 0, ready: 0, running: 0, succeeded: 1, failed: 0, system_error: 0, skipped: 0, cancelled: 0 },
    });
    const page2 = JSON.parse((await cli(['runs', 'list', '--project', 'listing', '--limit', '2', '--before', String(ids[1]), '--json'])).stdout);
    expect(page2).toEqual({ runs: [expect.objectContaining({ id: ids[0], status: 'running' })], next: null });
    const ok = JSON.parse((await cli(['runs', 'list', '--project', 'listing', '--status', 'succeeded', '--json'])).stdout);
    expect(ok.runs.map((r: { id: number }) => r.id)).toEqual([ids[1]]);
    // A running run whose only step waits in the queue reads "queued", as runs show says.
    const human = (await cli(['runs', 'list', '--project', 'listing'])).stdout.split('\n');
    expect(human.find((l) => l.startsWith(`${ids[0]} `))).toMatch(/\bl1\s+listing\s+queued\s+0\/1\s/);
    expect(human.find((l) => l.startsWith(`${ids[1]} `))).toMatch(/\bsucceeded\s+1\/1\s/);
    const bad = await cli(['runs', 'list', '--status', 'done']);
    expect(bad.code).toBe(2);
  });

  it('logs prints lines per step; --follow streams until the run ends', async () => {
    const id = Number((await cli(['runs', 'submit', join(ROOT, 'examples', 'hello.yaml')])).stdout);
    const lease = await deliver(db.current.pool, { run: id, step: 'hello' });
    await stepLogAppend(db.current.pool, { stepId: lease.stepId, attempt: 1, chunks: [{ stream: 'stdout', text: 'one\ntwo\n' }, { stream: 'stderr', text: 'warn\n' }] });
    const follow = spawn(['runs', 'logs', String(id), '--follow']);
    await follow.waitForOutput(/hello ! warn/);
    await stepLogAppend(db.current.pool, { stepId: lease.stepId, attempt: 1, chunks: [{ stream: 'stdout', text: 'three\n' }] });
    await follow.waitForOutput(/hello \| three/);
    // The attempt goes back to the queue and runs again on another runner, the follower watching.
    await giveBack(db.current.pool, lease, { newAttempt: true, reason: 'released by the runner' });
    await registerRunner(db.current.pool, 'rnr_cli2', 'build-02');
    const second = await deliver(db.current.pool, { run: id, step: 'hello', runnerId: 'rnr_cli2', batch: true });
    await follow.waitForOutput(/started on runner build-02/);
    await stepLogAppend(db.current.pool, { stepId: second.stepId, attempt: 2, chunks: [{ stream: 'stdout', text: 'four\n' }] });
    await complete(db.current.pool, second, { status: 'succeeded', runnerId: 'rnr_cli2' });
    expect(await follow.waitExit()).toBe(0);
    // After the step's last line, how its attempt ended (the duration varies).
    expect(follow.output.replace(/(ended: [^(\n]*)\([^)\n]*\)/g, '$1(T)')).toBe(
      [
        'hello # attempt 1 started on runner rnr_test',
        'hello | one',
        'hello | two',
        'hello ! warn',
        'hello | three',
        'hello # attempt 1 back to the queue as attempt 2: released by the runner',
        'hello # attempt 2 started on runner build-02',
        'hello | four',
        'hello # attempt 2 ended: succeeded, exit 0 (T)',
        '',
      ].join('\n'),
    );
    const whole = await cli(['runs', 'logs', String(id)]);
    expect(whole.stdout.trimEnd().split('\n').slice(-2)).toEqual(['hello | four', expect.stringMatching(/^hello # attempt 2 ended: succeeded, exit 0 \(\d[^)]*s\)$/)]);

    const j = await cli(['runs', 'logs', String(id), '--step', 'hello', '--json']);
    expect(j.code).toBe(0);
    expect(JSON.parse(j.stdout).lines.map((l: { step: string; attempt: number; stream: string; text: string }) => [l.step, l.attempt, l.stream, l.text])).toEqual([
      ['hello', 1, 'system', 'attempt 1 started on runner rnr_test'],
      ['hello', 1, 'stdout', 'one\ntwo\n'],
      ['hello', 1, 'stderr', 'warn\n'],
      ['hello', 1, 'stdout', 'three\n'],
      ['hello', 1, 'system', 'attempt 1 back to the queue as attempt 2: released by the runner'],
      ['hello', 2, 'system', 'attempt 2 started on runner build-02'],
      ['hello', 2, 'stdout', 'four\n'],
    ]);
    const nd = await cli(['runs', 'logs', String(id), '--follow', '--json']);
    expect(nd.code).toBe(0);
    expect(nd.stdout.trim().split('\n').map((l) => JSON.parse(l).text)).toEqual([
      'attempt 1 started on runner rnr_test',
      'one\ntwo\n',
      'warn\n',
      'three\n',
      'attempt 1 back to the queue as attempt 2: released by the runner',
      'attempt 2 started on runner build-02',
      'four\n',
    ]);
    const unknown = await cli(['runs', 'logs', String(id), '--step', 'nope']);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr.trim()).toBe(`Error: run ${id} has no step named "nope"`);
  });

  it('submit --wait follows the run: exit 0 when it succeeds, 1 with the final view when it fails', async () => {
    const before = await runCount();
    const ok = spawn(['runs', 'submit', join(ROOT, 'examples', 'diamond.yaml'), '--wait']);
    const id = Number((await ok.waitForOutput(/^(\d+)\n/m))[1]);
    expect(id).toBeGreaterThan(before);
    for (const s of ['a', 'b', 'c', 'd']) await runStep(db.current.pool, id, s);
    expect(await ok.waitExit()).toBe(0);
    expect(ok.output).toMatch(/d: succeeded/);
    expect(ok.output).toMatch(new RegExp(`run ${id} diamond \\(default\\): succeeded after`));

    const bad = spawn(['runs', 'submit', join(ROOT, 'examples', 'failing.yaml'), '--wait', '--json']);
    const run = (await waitFor(async () => (await db.current.pool.query(`SELECT max(id)::int AS id FROM runs WHERE name = 'failing'`)).rows[0].id as number | null, { what: 'the failing run' }))!;
    await runStep(db.current.pool, run, 'build', 'failed');
    await runStep(db.current.pool, run, 'lint');
    expect(await bad.waitExit()).toBe(1);
    const view = JSON.parse(bad.output);
    expect(view).toMatchObject({ id: run, status: 'failed', cause: 'step build failed with exit code 1' });
    expect(view.steps.map((s: { name: string; status: string }) => `${s.name}:${s.status}`)).toEqual(['build:failed', 'package:skipped', 'lint:succeeded']);

    // In human progress a skipped step's cause is said once.
    const told = spawn(['runs', 'submit', join(ROOT, 'examples', 'failing.yaml'), '--wait']);
    const again = Number((await told.waitForOutput(/^(\d+)\n/m))[1]);
    await runStep(db.current.pool, again, 'build', 'failed');
    await runStep(db.current.pool, again, 'lint');
    expect(await told.waitExit()).toBe(1);
    expect(told.output).toMatch(/^package: skipped: step build failed$/m);
    expect(told.output).not.toMatch(/skipped \(skipped/);
  });

  it('retry and cancel: JSON shapes, and both are safe to repeat', async () => {
    const id = await submit(readFileSync(join(ROOT, 'examples', 'failing.yaml'), 'utf8'));
    await runStep(db.current.pool, id, 'build', 'failed');
    await runStep(db.current.pool, id, 'lint');
    const retry = await cli(['runs', 'retry', String(id), '--json']);
    expect(retry.code).toBe(0);
    expect(JSON.parse(retry.stdout)).toEqual({ id, status: 'running', retried: [{ name: 'build', attempt: 2 }], reopened: ['package'] });
    const again = await cli(['runs', 'retry', String(id)]);
    expect(again.code).toBe(0);
    expect(again.stdout.trim()).toBe(`run ${id} has no failed steps; nothing to retry (running)`);

    const cancel = await cli(['runs', 'cancel', String(id), '--json']);
    expect(cancel.code).toBe(0);
    expect(JSON.parse(cancel.stdout)).toEqual({ id, status: 'cancelled', cancelled: true, steps: ['build', 'package'], revoked: 0 });
    const twice = await cli(['runs', 'cancel', String(id)]);
    expect(twice.code).toBe(0);
    expect(twice.stdout.trim()).toBe(`run ${id} already ended: cancelled; nothing to cancel`);
    const show = JSON.parse((await cli(['runs', 'show', String(id), '--json'])).stdout);
    expect(show).toMatchObject({ status: 'cancelled', cause: `cancelled by ${me}` });
  });
});
