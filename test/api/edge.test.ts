import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PARKED_PER_RUNNER } from '../../src/api/runner-routes.js';
import { serverPlan } from '../../src/features.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun } from '../support/seed.js';
import { startTestServer } from '../support/server.js';

/** Findings at the HTTP edge: each call here answered 500, leaked, or buffered before the fix. */
describe('the HTTP edge', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let admin: string;
  let reg: string;
  let runner: TestRunner;

  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: serverPlan(), config: { pollWindowMs: 10_000 } });
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ops' })).secret;
    reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'r' })).secret;
    runner = await new TestRunner(server.url).register(reg, { name: 'edge-runner', max_parallel_steps: 4 });
  });
  afterAll(async () => server?.stop());

  const raw = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  const asAdmin = () => ({ authorization: `Bearer ${admin}` });
  const asRunner = () => ({ authorization: `Bearer ${runner.credential}` });

  it('checks the credential before the body: anonymous callers get 401, never a field-level 400', async () => {
    expect((await raw('POST', '/api/fleet/drain', { nonsense: 1 })).status).toBe(401);
    expect((await raw('POST', '/api/fleet/drain', '{not json')).status).toBe(401);
    expect((await raw('POST', '/api/runner/complete', { completions: 'x' })).status).toBe(401);
    expect((await raw('POST', '/api/runner/acquire', { request_id: 'x' }, { authorization: 'Bearer ocrnr_wrong' })).status).toBe(401);
    // Registration carries its token in the body: a wrong one is 401 whatever the other fields say.
    expect((await raw('POST', '/api/runner/register', { registration_token: 'ocreg_nope', name: '\u0000', max_load: -1 })).status).toBe(401);
    expect((await raw('POST', '/api/runner/register', { name: 'x' })).status).toBe(401);
  });

  it('refuses an anonymous megabyte body without reading it into a 400', async () => {
    const big = JSON.stringify({ runner: 'x'.repeat(2 * 1024 * 1024) });
    const anon = await raw('POST', '/api/fleet/drain', big);
    expect(anon.status).toBe(401);
    // With a credential the route's own limit answers, 413, not a 500 or a parse.
    expect((await raw('POST', '/api/fleet/drain', big, asAdmin())).status).toBe(413);
    expect((await raw('POST', '/api/runner/register', JSON.stringify({ registration_token: reg, name: 'big', labels: ['a'.repeat(128 * 1024)] }))).status).toBe(413);
  });

  it('answers 400 naming the field for numbers beyond their column and for NUL / lone surrogates', async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ['/api/runner/ack', { leases: [{ step_id: 1e21, token: '1' }] }, /step_id/],
      ['/api/runner/ack', { leases: [{ step_id: '9999999999999999999', token: '1' }] }, /step_id/],
      ['/api/runner/renew', { leases: [{ step_id: 1, token: 1e21 }] }, /token/],
      ['/api/runner/complete', { completions: [{ step_id: 1, token: '9999999999999999999', exit_code: 0 }] }, /token/],
      ['/api/runner/acquire', { request_id: 'a\u0000b' }, /request_id: must not contain NUL/],
      ['/api/runner/acquire', { request_id: 'a\ud800' }, /request_id/],
      ['/api/runner/acquire', { request_id: 'ok', wait_ms: 2147483648 }, /wait_ms/],
      ['/api/runner/acquire', { request_id: 'ok', only_run_id: 1e21 }, /only_run_id/],
      ['/api/runner/release', { leases: [{ step_id: 1, token: '1', reason: 'x\u0000' }] }, /reason/],
      ['/api/runner/complete', { completions: [{ step_id: 1, token: '1', exit_code: 1, cause: '\u0000' }] }, /cause/],
    ];
    for (const [path, body, message] of cases) {
      const r = await raw('POST', path, body, asRunner());
      expect({ path, body, status: r.status }).toEqual({ path, body, status: 400 });
      expect(r.body.error.message).toMatch(message);
    }
    const register: Array<[Record<string, unknown>, RegExp]> = [
      [{ protocol_version: 2147483648 }, /protocol_version/],
      [{ max_load: 1e-50 }, /max_load/],
      [{ max_load: 1e300 }, /max_load/],
      [{ name: 'a\u0000' }, /name/],
    ];
    for (const [extra, message] of register) {
      const r = await raw('POST', '/api/runner/register', { registration_token: reg, name: 'fuzzed', ...extra });
      expect({ extra, status: r.status }).toEqual({ extra, status: 400 });
      expect(r.body.error.message).toMatch(message);
    }
    expect((await raw('POST', '/api/fleet/drain', { runner: 'a\u0000' }, asAdmin())).status).toBe(400);
    expect((await raw('POST', '/api/fleet/drain', { group: 'g', reason: 'r\u0000' }, asAdmin())).status).toBe(400);
    expect((await raw('POST', `/api/admin/replicas/${encodeURIComponent('a\u0000b')}/quiesce`, undefined, asAdmin())).status).toBe(400);
    const { rows } = await db.current.pool.query(`SELECT count(*)::int AS n FROM runners WHERE name = 'fuzzed'`);
    expect(rows[0].n).toBe(0);
  });

  it('stores step output holding NUL and broken UTF-16 visibly replaced, instead of failing the call', async () => {
    const { stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'nul' }] });
    const got = await runner.acquire({ max_offers: 1 });
    expect(got.status).toBe(200);
    const offer = got.body.offers[0];
    expect(Number(offer.step_id)).toBe(stepIds[0]);
    // A step whose run file sets no timeout gets steps.default_timeout (1 h).
    expect(offer.timeout_ms).toBe(3_600_000);
    const r = await raw('POST', '/api/runner/logs', { step_id: offer.step_id, token: offer.token, chunks: [{ stream: 'stdout', text: 'a\u0000b\ud800c\n' }] }, asRunner());
    expect(r.status).toBe(200);
    const { rows } = await db.current.pool.query(`SELECT chunk FROM step_logs WHERE step_id = $1 AND stream = 'stdout'`, [stepIds[0]]);
    expect(rows.map((x) => x.chunk)).toEqual(['a\u2400b\ufffdc\n']);
    const done = await raw('POST', '/api/runner/complete', { completions: [{ step_id: offer.step_id, token: offer.token, exit_code: 0 }] }, asRunner());
    expect(done.body.results[0].ok).toBe(true);
    // The same completion replayed by another runner with the first one's token is fenced, not ok.
    const other = await new TestRunner(server.url).register(reg, { name: 'edge-other' });
    const replay = await other.call('complete', { completions: [{ step_id: offer.step_id, token: offer.token, exit_code: 1 }] });
    expect(replay.body.results[0]).toMatchObject({ ok: false, status: 409 });
    // The first runner's repeat stays an idempotent ok.
    expect((await runner.call('complete', { completions: [{ step_id: offer.step_id, token: offer.token, exit_code: 0 }] })).body.results[0].ok).toBe(true);
  });

  it('refuses a registration under the name of a live runner; an offline holder is retired and the name passes on', async () => {
    const taken = await raw('POST', '/api/runner/register', { registration_token: reg, name: 'edge-runner' });
    expect(taken.status).toBe(409);
    expect(taken.body.error.message).toMatch(/^runner name edge-runner is taken by rnr_[0-9a-f]+ \(online\)/);
    const ghost = await new TestRunner(server.url).register(reg, { name: 'edge-ghost' });
    await db.current.pool.query(`UPDATE runners SET state = 'offline' WHERE id = $1`, [ghost.runnerId]);
    const again = await new TestRunner(server.url).register(reg, { name: 'edge-ghost' });
    const { rows } = await db.current.pool.query(`SELECT id, deleted_at IS NOT NULL AS retired FROM runners WHERE name = 'edge-ghost' ORDER BY registered_at`);
    expect(rows).toEqual([{ id: ghost.runnerId, retired: true }, { id: again.runnerId, retired: false }]);
    expect((await ghost.acquire({ wait_ms: 0 })).status).toBe(401);
  });

  it(`caps a runner's parked acquires at ${PARKED_PER_RUNNER}: the next one is 429`, async () => {
    const ctl = new AbortController();
    // A call refused while the slots are full, whichever it was: one of the parked calls can
    // arrive after a probe took the last slot, and it is then the one refused.
    const refused: Array<{ status: number; body: any }> = [];
    const parked = Array.from({ length: PARKED_PER_RUNNER }, () =>
      runner.acquire({ wait_ms: 8_000 }, ctl.signal).then((r) => void (r.status === 429 && refused.push(r)), () => undefined),
    );
    try {
      // Each parked call holds a slot as soon as the server has it; probe until one is refused.
      const deadline = Date.now() + 10_000;
      while (refused.length === 0 && Date.now() < deadline) {
        const extra = await runner.acquire({ wait_ms: 0 });
        if (extra.status === 429) refused.push(extra);
      }
      expect(refused[0]?.status).toBe(429);
      expect(refused[0].body.error.message).toMatch(/too many acquires/);
    } finally {
      ctl.abort();
      await Promise.all(parked);
    }
  });

  it('shows anonymous callers of /healthz and /readyz no host name or error text', async () => {
    const health = await raw('GET', '/healthz');
    expect(health).toEqual({ status: 200, body: { status: 'ok' } });
    const ready = await raw('GET', '/readyz');
    expect(ready.body).toEqual({ status: 'ready', failing: [], checks: [{ name: 'store', ok: true }] });
    expect((await raw('GET', '/healthz', undefined, asAdmin())).body.replica).toBe(server.replica.replicaId);
    expect((await raw('GET', '/readyz', undefined, asAdmin())).body.replica).toBe(server.replica.replicaId);
  });
});
