import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookSignature } from '../../src/core/triggers.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { CliProcess, runCli } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { LIBFAKETIME, skewedEnv } from '../support/faketime.js';

/**
 * Cross-replica time is the database's: proved with clocks that disagree. Two real server
 * processes, one 90 s ahead and one 90 s behind (libfaketime), and runners 5 minutes ahead, on one
 * PostgreSQL at the default 5 s coordination tick. If any decision about a lease, a due time or an
 * expiry were taken by a process's own clock, the fast replica would steal leases and fire timers
 * 90 s early, and the slow one would expire them 90 s late.
 */
const TICK_MS = 5_000;
const LEASE_TTL_MS = 10_000;
/** Late by at most one tick, plus what a shared, loaded machine adds to a loop's turn. */
const LATE_MS = TICK_MS + 4_000;
/** How long a dead replica's row stays visible; the leader reaps it on its tick. */
const RETENTION_S = 600;

if (!LIBFAKETIME) {
  // Said plainly, never skipped in silence: .ci/run installs it; a developer machine may not have it.
  console.warn('skewed-clocks.test.ts: libfaketime is not installed (as root: apt-get install -y libfaketime); the skewed-clock test cannot run here');
}

describe.skipIf(!LIBFAKETIME)('replicas ±90 s and runners +5 min off true time', () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-skew-'));
  const procs: CliProcess[] = [];
  let registration = '';
  const replicas: Array<{ proc: CliProcess; url: string; id: string; offset: string }> = [];

  const dbNow = async (): Promise<number> => (await db.current.pool.query(`SELECT now() AS t`)).rows[0].t.getTime();

  async function startReplica(offset: string) {
    const home = join(dir, `server${offset}`);
    const proc = new CliProcess(['server', 'start', '--database-url', db.current.url, '--port', '0', '--home', home, '--log-level', 'info', '--lease-ttl', `${LEASE_TTL_MS / 1000}s`, '--replica-retention', `${RETENTION_S}s`], { OPSCHAIN_HOME: home, ...skewedEnv(offset) });
    procs.push(proc);
    const m = await proc.waitForOutput(/"time":"([^"]+)"[^\n]*"url":"(http:[^"]+)","replica":"([^"]+)"[^\n]*opschain server ready/);
    replicas.push({ proc, url: m[2], id: m[3], offset });
    return { loggedAt: Date.parse(m[1]) };
  }

  function startRunner(name: string, offset: string): CliProcess {
    const home = join(dir, name);
    const proc = new CliProcess(
      ['runner', '--server', replicas.map((r) => r.url).join(','), '--registration-token', registration, '--name', name, '--max-parallel-steps', '4', '--log-level', 'warn', '--work-dir', join(dir, `work-${name}`)],
      { OPSCHAIN_HOME: home, ...skewedEnv(offset) },
    );
    procs.push(proc);
    return proc;
  }

  async function submit(name: string, steps: Record<string, string>): Promise<number> {
    const file = JSON.stringify({ name, steps: Object.fromEntries(Object.entries(steps).map(([k, run]) => [k, { run }])) });
    const r = await runCli(['runs', 'submit', '-', '--json'], { OPSCHAIN_DATABASE_URL: db.current.url, ...skewedEnv('+90s') }, { input: file });
    expect(r.code, r.stderr).toBe(0);
    return Number(JSON.parse(r.stdout).id);
  }

  const stepRows = async (run: number) =>
    (await db.current.pool.query<{ name: string; status: string; attempt: number }>(`SELECT name, status, attempt FROM steps WHERE run_id = $1 ORDER BY name`, [run])).rows;

  beforeAll(async () => {
    registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'skewed' })).secret;
    const [ahead, behind] = await Promise.all([startReplica('+90s'), startReplica('-90s')]);
    // The skew is real: each replica's own log stamps its ready line 90 s off the database's clock.
    const now = await dbNow();
    expect(ahead.loggedAt - now).toBeGreaterThan(80_000);
    expect(behind.loggedAt - now).toBeLessThan(-80_000);
    await waitFor(
      async () => {
        const { rows } = await db.current.pool.query<{ n: number; leader: number }>(
          `SELECT count(DISTINCT holder) FILTER (WHERE name LIKE 'shard:%')::int AS n,
                  count(*) FILTER (WHERE name NOT LIKE 'shard:%')::int AS leader,
                  count(*) FILTER (WHERE name LIKE 'shard:%')::int AS shards
             FROM coordination_leases WHERE expires_at > now()
           HAVING count(*) FILTER (WHERE name LIKE 'shard:%') = 64`,
        );
        return rows[0]?.n === 2 && rows[0].leader >= 1;
      },
      { timeoutMs: 60_000, intervalMs: 200, what: 'both skewed replicas sharing the 64 shards under one leader' },
    );
  }, 90_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    rmSync(dir, { recursive: true, force: true });
  });

  it('shard and leader leases settle once: over three ticks no lease changes hands or is taken again', async () => {
    const first = new Map<string, string>();
    let samples = 0;
    const until = Date.now() + 3 * TICK_MS;
    while (Date.now() < until) {
      const { rows } = await db.current.pool.query<{ name: string; holder: string; token: string; live: boolean }>(
        `SELECT name, holder, token::text, expires_at > now() AS live FROM coordination_leases ORDER BY name`,
      );
      const shards = rows.filter((r) => r.name.startsWith('shard:'));
      // Every shard held, and held by a live lease: the fast replica never judged one expired early.
      expect(shards.length).toBe(64);
      for (const r of rows) {
        expect(r.live, `${r.name} held by ${r.holder} is past its expiry`).toBe(true);
        const key = `${r.holder}#${r.token}`;
        if (!first.has(r.name)) first.set(r.name, key);
        // The same holder and the same fencing token: renewed in place, never taken over or re-acquired.
        expect(key, r.name).toBe(first.get(r.name));
      }
      samples++;
      await new Promise((res) => setTimeout(res, 200));
    }
    expect(samples).toBeGreaterThan(10);
    const holders = new Set([...first.values()].map((k) => k.split('#')[0]));
    expect(holders).toEqual(new Set(replicas.map((r) => r.id)));
  }, 60_000);

  it('a runner 5 min ahead runs steps longer than the lease TTL on renewals, each exactly once', async () => {
    startRunner('ahead-1', '+5m');
    const run = await submit('renewed', { a: 'sleep 13', b: 'sleep 13' });
    await waitFor(async () => (await stepRows(run)).every((s) => s.status === 'succeeded'), { timeoutMs: 60_000, intervalMs: 250, what: 'both long steps to succeed' });
    // Attempt 1 each: neither lease expired while its runner renewed it from a clock 5 min fast.
    expect(await stepRows(run)).toEqual([
      { name: 'a', status: 'succeeded', attempt: 1 },
      { name: 'b', status: 'succeeded', attempt: 1 },
    ]);
  }, 90_000);

  it("a lost runner's lease ends on the database's clock: not before it expires, at most a tick after", async () => {
    const run = await submit('lost', { long: 'sleep 600' });
    const leaseOf = async () =>
      (await db.current.pool.query<{ attempt: number; expires_at: Date; runner_id: string | null; acked: boolean }>(
        `SELECT attempt, expires_at, runner_id, acked_at IS NOT NULL AS acked FROM step_leases WHERE run_id = $1`,
        [run],
      )).rows[0];
    await waitFor(async () => (await leaseOf())?.acked, { timeoutMs: 30_000, intervalMs: 100, what: 'the long step to start' });
    // The only runner dies without a word: nothing renews the lease from here on.
    const runner = procs.find((p) => p.child.spawnargs.includes('ahead-1'))!;
    await runner.stop('SIGKILL');
    const lastExpiry = (await leaseOf())!.expires_at.getTime();
    let endedAt = 0;
    await waitFor(
      async () => {
        const lease = await leaseOf();
        if (lease && lease.attempt === 1) return false;
        endedAt = await dbNow();
        return true;
      },
      { timeoutMs: LEASE_TTL_MS + 30_000, intervalMs: 100, what: 'the lost lease to end' },
    );
    const expiry = (await leaseOf())?.expires_at ?? null;
    expect(expiry === null || expiry.getTime() !== lastExpiry).toBe(true);
    // Sampled every 100 ms: the end lies within [expiry, expiry + one tick + a loaded machine's delay].
    expect(endedAt).toBeGreaterThanOrEqual(lastExpiry);
    expect(endedAt - lastExpiry).toBeLessThan(LATE_MS);
    // A delivered lease past its TTL fails fast as runner_lost (docs/guarantees.md): once.
    const { rows } = await db.current.pool.query(`SELECT status, attempt, cause FROM steps WHERE run_id = $1`, [run]);
    expect(rows).toEqual([{ status: 'system_error', attempt: 1, cause: 'runner lost: lease expired without a result' }]);
  }, 90_000);

  it('a one-shot set from a clock 90 s fast fires once, on the database clock: not early, at most a tick late', async () => {
    const env = { OPSCHAIN_DATABASE_URL: db.current.url, ...skewedEnv('+90s') };
    const put = await runCli(['templates', 'put', '-', '--name', 'skewed'], env, { input: JSON.stringify({ name: 'skewed', steps: { s: { run: 'true' } } }) });
    expect(put.code, put.stderr).toBe(0);
    const add = await runCli(['triggers', 'once', 'add', 'skewed', '--at', '+6s', '--json'], env);
    expect(add.code, add.stderr).toBe(0);
    const id = JSON.parse(add.stdout).id;
    const due = (await db.current.pool.query<{ fire_at: Date }>(`SELECT fire_at FROM one_shots WHERE id = $1`, [id])).rows[0].fire_at.getTime();
    // +6s from the database's now, not from the CLI's clock 90 s ahead.
    const created = await dbNow();
    expect(due - created).toBeGreaterThan(0);
    expect(due - created).toBeLessThanOrEqual(6_000);
    const ticks = (await waitFor(
      async () => {
        const { rows } = await db.current.pool.query<{ recorded_at: Date; fired_at: Date | null; outcome: string; run_id: string | null }>(
          `SELECT recorded_at, fired_at, outcome, run_id FROM trigger_ticks WHERE trigger_id = $1`,
          [id],
        );
        return rows.some((r) => r.outcome !== 'pending') ? rows : undefined;
      },
      { timeoutMs: 6_000 + LATE_MS + 10_000, intervalMs: 100, what: 'the one-shot to fire' },
    ))!;
    // Give a second loop (the other replica's) a full tick to fire it again if it could.
    await new Promise((res) => setTimeout(res, TICK_MS + 1_000));
    const again = (await db.current.pool.query(`SELECT count(*)::int AS n FROM trigger_ticks WHERE trigger_id = $1`, [id])).rows[0].n;
    expect(again).toBe(1);
    expect(ticks[0].outcome).toBe('fired');
    expect(ticks[0].run_id).not.toBeNull();
    // Recorded as due no earlier than it was due, and its run launched within a tick of it.
    expect(ticks[0].recorded_at.getTime()).toBeGreaterThanOrEqual(due);
    expect(ticks[0].fired_at!.getTime() - due).toBeLessThan(LATE_MS);
  }, 90_000);

  it("retention counts on the database's clock: a dead replica's row 60 s short of it stays, one 60 s past it goes", async () => {
    await db.current.pool.query(
      `INSERT INTO replicas (id, host, version, heartbeat_at, stopped_at)
       VALUES ('dead-young', 'h', 'v', now() - make_interval(secs => $1 - 60), now() - make_interval(secs => $1 - 60)),
              ('dead-old', 'h', 'v', now() - make_interval(secs => $1 + 60), now() - make_interval(secs => $1 + 60))`,
      [RETENTION_S],
    );
    const ids = async () => (await db.current.pool.query<{ id: string }>(`SELECT id FROM replicas WHERE id LIKE 'dead-%' ORDER BY id`)).rows.map((r) => r.id);
    await waitFor(async () => !(await ids()).includes('dead-old'), { timeoutMs: 3 * TICK_MS + 10_000, intervalMs: 200, what: 'the leader to reap the replica past its retention' });
    // The leader is 90 s ahead or behind: by its own clock the young row would be 30 s past (or 150 s short).
    await new Promise((res) => setTimeout(res, TICK_MS + 1_000));
    expect(await ids()).toEqual(['dead-young']);
  }, 60_000);

  it("a webhook's 5-minute window is the store's: the same calls are accepted by the fast and the slow replica", async () => {
    const env = { OPSCHAIN_DATABASE_URL: db.current.url };
    const put = await runCli(['templates', 'put', '-', '--name', 'hooked'], env, { input: JSON.stringify({ name: 'hooked', steps: { s: { run: 'true' } } }) });
    expect(put.code, put.stderr).toBe(0);
    const add = await runCli(['triggers', 'webhook', 'add', 'hooked', '--json'], env);
    expect(add.code, add.stderr).toBe(0);
    const hook = JSON.parse(add.stdout) as { path: string; secret: string };
    const call = async (replica: { url: string }, ageSeconds: number, delivery: string) => {
      const ts = String(Math.floor((await dbNow()) / 1000) - ageSeconds);
      const body = JSON.stringify({ delivery });
      const res = await fetch(`${replica.url}${hook.path}`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', 'x-opschain-timestamp': ts, 'x-opschain-signature': webhookSignature(hook.secret, ts, Buffer.from(body)), 'x-opschain-delivery': delivery },
      });
      return res.status;
    };
    const fast = replicas.find((r) => r.offset === '+90s')!;
    const slow = replicas.find((r) => r.offset === '-90s')!;
    // 240 s old by the store: inside the window, though 330 s old by the fast replica's clock.
    expect(await call(fast, 240, 'young-at-fast')).toBe(202);
    expect(await call(slow, 240, 'young-at-slow')).toBe(202);
    // 330 s old by the store: outside it, though 240 s old by the slow replica's clock.
    expect(await call(slow, 330, 'old-at-slow')).toBe(401);
    expect(await call(fast, 330, 'old-at-fast')).toBe(401);
  }, 60_000);
});
