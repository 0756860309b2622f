import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tokenCreate } from '../../src/store/tokens.js';
import { CliProcess, runCli } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { PgBouncer, pgbouncerBinary } from '../support/pgbouncer.js';
import { freePort } from '../../bench/procs.js';

const bin = pgbouncerBinary();
if ('missing' in bin) {
  // Loud on purpose: a skipped PgBouncer test must never pass for a proven one.
  console.warn(`\n!!! SKIPPED: the PgBouncer tests: ${bin.missing}\n`);
}

/**
 * The whole server and the CLI through Debian's PgBouncer in transaction pooling mode, the way
 * many replicas share one PostgreSQL, with LISTEN on a direct session. Needs `npm run build`.
 */
describe.skipIf('missing' in bin)('the server and the CLI through PgBouncer in transaction mode', { timeout: 180_000 }, () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-pgbouncer-test-'));
  const procs: CliProcess[] = [];
  const bouncers: PgBouncer[] = [];
  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop();
    for (const b of bouncers) await b.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const bouncer = async (mode: 'transaction' | 'session', opts: { ignoreStartupParameters?: boolean } = {}) => {
    const b = new PgBouncer((bin as { path: string }).path, db.current.url, mode, opts);
    bouncers.push(b);
    await b.start();
    return b;
  };
  const server = async (name: string, args: string[]) => {
    const port = await freePort();
    const home = join(dir, name);
    const p = new CliProcess(['server', 'start', '--port', String(port), '--home', home, '--log-level', 'info', '--poll-window', '5s', '--lease-ttl', '20s', ...args], { OPSCHAIN_HOME: home, OPSCHAIN_DATABASE_URL: '', DATABASE_URL: '' });
    procs.push(p);
    await p.waitForOutput(/opschain server ready/, 60_000);
    return { proc: p, url: `http://127.0.0.1:${port}` };
  };

  it('submits, delivers, completes, pulls a lever, fires a trigger and shows the queue, as without it', async () => {
    const pgb = await bouncer('transaction');
    const { proc, url } = await server('replica', ['--database-url', pgb.url, '--listen-database-url', db.current.url]);
    expect(proc.output).toMatch(/named prepared statements off/);
    expect(proc.output).not.toMatch(/LISTEN\/NOTIFY is off|standby/);

    const registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'pgbouncer' })).secret;
    const runner = new CliProcess(
      ['runner', '--server', url, '--registration-token', registration, '--name', 'pgb-runner', '--work-dir', join(dir, 'work'), '--log-level', 'info'],
      { OPSCHAIN_HOME: join(dir, 'runner-home'), OPSCHAIN_SERVER: '', OPSCHAIN_REGISTRATION_TOKEN: '', OPSCHAIN_LOG_LEVEL: '' },
    );
    procs.push(runner);
    await runner.waitForOutput(/"runner_id":"rnr_/, 60_000);

    const cliHome = join(dir, 'cli-home');
    const through = (url: string) => (args: string[]) => runCli([...args, '--database-url', url, '--json'], { OPSCHAIN_HOME: cliHome, OPSCHAIN_SERVER: '', OPSCHAIN_DATABASE_URL: '' });
    const viaPgb = through(pgb.url);
    const direct = through(db.current.url);
    // What changes from one read to the next (the time of the read, ages, when a runner was last seen) is left out of the comparisons.
    const strip = (v: unknown) => JSON.parse(JSON.stringify(v, (k, x) => (/^at$|age|now|generated|lastSeen|heartbeat/i.test(k) ? undefined : x)));
    const json = (r: { code: number | null; stdout: string; stderr: string }) => {
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout);
    };

    // Submit through PgBouncer; the runner gets the steps (the NOTIFY reaches the direct LISTEN) and completes them.
    const file = join(dir, 'run.yaml');
    writeFileSync(file, 'name: via-pgbouncer\nsteps:\n  a:\n    run: echo one\n  b:\n    needs: [a]\n    run: echo two\n');
    const submitted = json(await viaPgb(['runs', 'submit', file, '--wait', '--timeout', '60s']));
    expect(submitted.status).toBe('succeeded');
    const runId = submitted.id ?? submitted.run_id;
    const shown = json(await viaPgb(['runs', 'show', String(runId)]));
    expect(shown).toEqual(json(await direct(['runs', 'show', String(runId)])));

    // A lever: drain the runner and undrain it, each seen the same both ways.
    json(await viaPgb(['fleet', 'drain', 'pgb-runner', '--reason', 'pgbouncer test']));
    const drained = json(await viaPgb(['fleet', 'runners']));
    expect(JSON.stringify(drained)).toMatch(/"drained":true/);
    expect(strip(drained)).toEqual(strip(json(await direct(['fleet', 'runners']))));
    json(await viaPgb(['fleet', 'undrain', 'pgb-runner']));

    // A trigger: a template and a one-shot due now, fired by the leader's launch loop through PgBouncer.
    json(await viaPgb(['templates', 'put', file, '--name', 'pgb-template']));
    json(await viaPgb(['triggers', 'once', 'add', 'pgb-template', '--at', 'now']));
    const fired = await waitFor(
      async () => (await db.current.pool.query(`SELECT id FROM runs WHERE template_name = 'pgb-template' AND status = 'succeeded'`)).rows[0],
      { what: 'the one-shot run done', timeoutMs: 60_000 },
    );
    expect(fired.id).toBeGreaterThan(runId);

    // The admin queue: the same view both ways once the queue is idle.
    const queue = json(await viaPgb(['admin', 'queue']));
    expect(queue).toBeTypeOf('object');
    expect(strip(queue)).toEqual(strip(json(await direct(['admin', 'queue']))));

    // The work went through PgBouncer, and nothing of the server went wrong on the way.
    expect(await pgb.transactions()).toBeGreaterThan(100);
    expect(proc.output).not.toMatch(/"level":(50|60)|prepared statement .* does not exist|unsupported startup parameter/);
  });

  it('names a transaction pooler with no listen URL (and then polls), a session pooler where transaction pooling was meant, and refused startup parameters', async () => {
    const tx = await bouncer('transaction');
    const polling = await server('no-listen', ['--database-url', tx.url]);
    expect(polling.proc.output).toMatch(/no --listen-database-url is set: LISTEN\/NOTIFY is off/);
    // With no notifications, work submitted elsewhere is still found by polling and done.
    const registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'polling' })).secret;
    const runner = new CliProcess(
      ['runner', '--server', polling.url, '--registration-token', registration, '--name', 'polling-runner', '--work-dir', join(dir, 'polling-work'), '--log-level', 'info'],
      { OPSCHAIN_HOME: join(dir, 'polling-runner-home'), OPSCHAIN_SERVER: '', OPSCHAIN_REGISTRATION_TOKEN: '', OPSCHAIN_LOG_LEVEL: '' },
    );
    procs.push(runner);
    await runner.waitForOutput(/"runner_id":"rnr_/, 60_000);
    const file = join(dir, 'polled.yaml');
    writeFileSync(file, 'name: polled\nsteps:\n  a:\n    run: "true"\n');
    const done = await runCli(['runs', 'submit', file, '--wait', '--timeout', '60s', '--database-url', db.current.url, '--json'], { OPSCHAIN_HOME: join(dir, 'cli-home'), OPSCHAIN_SERVER: '', OPSCHAIN_DATABASE_URL: '' });
    expect(done.code, done.stderr).toBe(0);
    expect(JSON.parse(done.stdout).status).toBe('succeeded');
    await runner.stop();
    const session = await bouncer('session');
    const sessioned = await server('session', ['--database-url', session.url, '--listen-database-url', db.current.url]);
    expect(sessioned.proc.output).toMatch(/PgBouncer in session mode, or PostgreSQL itself/);
    expect(sessioned.proc.output).not.toMatch(/named prepared statements off/);
    // A PgBouncer without ignore_startup_parameters refuses the pool's timeouts: the start says what to add.
    const strict = await bouncer('transaction', { ignoreStartupParameters: false });
    const home = join(dir, 'strict');
    const refused = await runCli(['server', 'start', '--port', '0', '--home', home, '--database-url', strict.url, '--listen-database-url', db.current.url], { OPSCHAIN_HOME: home, OPSCHAIN_DATABASE_URL: '', DATABASE_URL: '' }, { timeoutMs: 60_000 });
    expect(refused.code).not.toBe(0);
    expect(refused.stdout + refused.stderr).toMatch(/refuses the startup parameter statement_timeout: add "ignore_startup_parameters = statement_timeout, lock_timeout, idle_in_transaction_session_timeout"/);
  });
});
