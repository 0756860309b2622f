import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tokenCreate } from '../../src/store/tokens.js';
import { CliProcess, runCli } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';

const LIBS = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/faketime/libfaketime.so.1', '/usr/local/lib/faketime/libfaketime.so.1'];
const lib = LIBS.find((p) => existsSync(p));
if (!lib) console.warn('\n!!! SKIPPED: the skewed-clock test: libfaketime is not installed (apt-get install -y libfaketime; .ci/run does)\n');

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const addr = srv.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

const TTL_MS = 6_000;
/**
 * Never early is exact; late is bounded by a tick plus a wide margin, as the build machine may be
 * loaded many times over: the expiry sweep runs on the coordination tick (5 s), the launch loop
 * looks again within 2 s.
 */
const SWEEP_SLACK_MS = 5_000 + 10_000;
const LAUNCH_SLACK_MS = 2_000 + 8_000;

/**
 * Cross-replica time is the store's: one replica runs 90 s ahead, another 90 s behind, and the
 * runner 5 minutes ahead (libfaketime; monotonic clocks, which timers use, left alone), and the
 * lead, the shards, leases, their expiry and a one-shot's due time behave as with true clocks.
 * Needs `npm run build`.
 */
describe.skipIf(!lib)('skewed clocks: +90 s and -90 s replicas, a +5 min runner', { timeout: 180_000 }, () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-skew-'));
  const procs: CliProcess[] = [];
  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGTERM', 10_000);
    rmSync(dir, { recursive: true, force: true });
  });

  const skewed = (offset: string) => ({ LD_PRELOAD: lib!, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_NO_CACHE: '1' });
  const dbNow = async () => (await db.current.pool.query(`SELECT now() AS t`)).rows[0].t as Date;

  it('the lead and shards settle, a lease outlives its TTL by renewals, expiry and a one-shot come on time by the store\'s clock', async () => {
    const replicas = [];
    for (const [i, offset] of ['+90s', '-90s'].entries()) {
      const port = await freePort();
      const home = join(dir, `replica-${i}`);
      const p = new CliProcess(
        ['server', 'start', '--database-url', db.current.url, '--port', String(port), '--home', home, '--log-level', 'info', '--lease-ttl', `${TTL_MS}ms`, '--poll-window', '2s'],
        { OPSCHAIN_HOME: home, OPSCHAIN_DATABASE_URL: '', DATABASE_URL: '', ...skewed(offset) },
      );
      procs.push(p);
      await p.waitForOutput(/opschain server ready/, 60_000);
      replicas.push({ proc: p, url: `http://127.0.0.1:${port}` });
    }
    // The skew is real: each replica's log lines carry its own clock.
    const logTime = (p: CliProcess) => Date.parse(/"time":"([^"]+)"/.exec(p.output)![1]);
    expect(logTime(replicas[0].proc) - Date.now()).toBeGreaterThan(60_000);
    expect(Date.now() - logTime(replicas[1].proc)).toBeGreaterThan(60_000);

    // The lead and every shard are held by the two replicas, and each holder renews what it holds.
    const held = async () => (await db.current.pool.query(`SELECT name, holder, expires_at FROM coordination_leases WHERE expires_at > now()`)).rows;
    const settled = await waitFor(async () => {
      const rows = await held();
      return rows.filter((r) => r.name.startsWith('shard:')).length === 64 && rows.some((r) => r.name === 'cron-leader') && new Set(rows.map((r) => r.holder)).size === 2 ? rows : undefined;
    }, { what: 'shards spread over both replicas and a leader', timeoutMs: 60_000 });
    await waitFor(async () => {
      const now = new Map((await held()).map((r) => [r.name, r]));
      return settled!.every((r) => now.get(r.name)?.holder === r.holder && now.get(r.name)!.expires_at > r.expires_at);
    }, { what: 'the same holders renewing', timeoutMs: 30_000 });

    const registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'skew' })).secret;
    const runner = new CliProcess(
      ['runner', '--server', replicas.map((r) => r.url).join(','), '--registration-token', registration, '--name', 'skewed-runner', '--work-dir', join(dir, 'work'), '--log-level', 'info', '--max-parallel-steps', '2'],
      { OPSCHAIN_HOME: join(dir, 'runner-home'), OPSCHAIN_SERVER: '', OPSCHAIN_REGISTRATION_TOKEN: '', OPSCHAIN_LOG_LEVEL: '', ...skewed('+5m') },
    );
    procs.push(runner);
    await runner.waitForOutput(/"runner_id":"rnr_/, 60_000);
    const cli = (args: string[]) => runCli([...args, '--database-url', db.current.url, '--json'], { OPSCHAIN_HOME: join(dir, 'cli'), OPSCHAIN_SERVER: '', OPSCHAIN_DATABASE_URL: '' });

    // A step running past the lease TTL keeps its lease by renewals: attempt 1, never lost.
    const long = join(dir, 'long.yaml');
    writeFileSync(long, `name: past-the-ttl\nsteps:\n  long:\n    run: sleep ${Math.ceil((TTL_MS * 1.5) / 1000)}\n`);
    const r1 = await cli(['runs', 'submit', long, '--wait', '--timeout', '90s']);
    expect(r1.code, r1.stderr).toBe(0);
    const { rows: longStep } = await db.current.pool.query(`SELECT status, attempt FROM steps WHERE run_id = $1`, [JSON.parse(r1.stdout).id]);
    expect(longStep).toEqual([{ status: 'succeeded', attempt: 1 }]);

    // A one-shot due 8 s from now by the store's clock fires once, not before, and within a tick and a margin.
    const once = join(dir, 'once.yaml');
    writeFileSync(once, 'name: skew-once\nsteps:\n  a:\n    run: "true"\n');
    expect((await cli(['templates', 'put', once])).code).toBe(0);
    const fireAt = new Date((await dbNow()).getTime() + 8_000);
    const added = await cli(['triggers', 'once', 'add', 'skew-once', '--at', fireAt.toISOString()]);
    expect(added.code, added.stderr).toBe(0);
    const fired = await waitFor(async () => (await db.current.pool.query(`SELECT id, created_at FROM runs WHERE template_name = 'skew-once'`)).rows[0], { what: 'the one-shot fired', timeoutMs: 60_000 });
    expect(fired.created_at.getTime()).toBeGreaterThanOrEqual(fireAt.getTime());
    expect(fired.created_at.getTime() - fireAt.getTime()).toBeLessThan(LAUNCH_SLACK_MS);
    await waitFor(async () => (await db.current.pool.query(`SELECT 1 FROM runs WHERE id = $1 AND status = 'succeeded'`, [fired.id])).rowCount, { what: 'the one-shot run done', timeoutMs: 60_000 });
    expect((await db.current.pool.query(`SELECT count(*)::int AS n FROM runs WHERE template_name = 'skew-once'`)).rows[0].n).toBe(1);

    // The runner dies mid-step: its lease expires no earlier than its TTL after the last renewal, and within a sweep.
    writeFileSync(long, 'name: lost\nsteps:\n  long:\n    run: sleep 120\n');
    const r2 = await cli(['runs', 'submit', long]);
    expect(r2.code, r2.stderr).toBe(0);
    const lostRun = JSON.parse(r2.stdout).id;
    await waitFor(async () => (await db.current.pool.query(`SELECT 1 FROM scheduler_job_leases WHERE run_id = $1 AND executing`, [lostRun])).rowCount, { what: 'the step running and renewed', timeoutMs: 30_000 });
    runner.child.kill('SIGKILL');
    await runner.stop();
    const { rows: lease } = await db.current.pool.query(`SELECT expires_at FROM scheduler_job_leases WHERE run_id = $1`, [lostRun]);
    const expiresAt = lease[0].expires_at as Date;
    const ended = await waitFor(async () => (await db.current.pool.query(`SELECT status, cause, finished_at FROM steps WHERE run_id = $1 AND finished_at IS NOT NULL`, [lostRun])).rows[0], { what: 'the lost step ended', timeoutMs: 60_000 });
    expect(ended.status).toBe('system_error');
    expect(ended.finished_at.getTime()).toBeGreaterThanOrEqual(expiresAt.getTime());
    expect(ended.finished_at.getTime() - expiresAt.getTime()).toBeLessThan(SWEEP_SLACK_MS);
    for (const r of replicas) expect(r.proc.output).not.toMatch(/"level":(50|60)/);
  });
});
