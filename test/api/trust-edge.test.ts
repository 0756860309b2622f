import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PARKED_LONG_POLLS_PER_TOKEN } from '../../src/api/ops-routes.js';
import { serverPlan } from '../../src/features.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { runInProcess } from '../support/inproc.js';
import { seedRun } from '../support/seed.js';
import { startTestServer } from '../support/server.js';

/** Trust boundaries at the HTTP edge: identifiers, refusals that quote names, oversized headers, parked long polls. */
describe('the HTTP edge: names, headers and long polls', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let admin: string;

  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: serverPlan(), config: { pollWindowMs: 5_000 } });
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ops' })).secret;
  });
  afterAll(async () => server?.stop());

  // One connection per call: a keep-alive socket reused for a parked poll that the client then
  // aborts can hold the server's close open for its connection timeout (seen, not yet explained).
  const call = async (method: string, path: string, body?: unknown, token = admin, signal?: AbortSignal) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, connection: 'close', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
  };
  const rows = async (): Promise<Record<string, number>> =>
    (await db.current.pool.query(`SELECT (SELECT count(*) FROM pool_limits)::int AS pools, (SELECT count(*) FROM runner_groups)::int AS groups, (SELECT count(*) FROM projects)::int AS projects, (SELECT count(*) FROM tokens)::int AS tokens, (SELECT count(*) FROM audit_log)::int AS audit`)).rows[0];

  // C0 (ESC, CR), DEL, C1 (the 8-bit CSI, NEL) and a bidi override: each refused in a name.
  const CONTROLS = ['\u001b[2K', '\r', '\u007f', '\u009b2K', '\u0085', '\u202e', '\u2066'];

  it('refuses control characters, C1 included, in pool, group, project and token names: 400 naming the field, nothing written', async () => {
    const before = await rows();
    for (const c of CONTROLS) {
      const bad = `db${c}x`;
      const cases: Array<[string, string, unknown, RegExp]> = [
        ['POST', `/api/pools/${encodeURIComponent(bad)}`, { limit: 2 }, /^pool name "db.*x": contains the control character U\+/],
        ['POST', `/api/groups/${encodeURIComponent(bad)}`, { attributes: {} }, /^group "db.*x": contains the control character U\+/],
        ['POST', `/api/projects/${encodeURIComponent(bad)}`, { weight: 2 }, /^project "db.*x": contains the control character U\+/],
        ['POST', '/api/tokens', { kind: 'admin', name: bad, scope: 'read' }, /^--name "db.*x": contains the control character U\+/],
      ];
      for (const [method, path, body, message] of cases) {
        const r = await call(method, path, body);
        expect({ path, c, status: r.status }).toEqual({ path, c, status: 400 });
        expect(r.body.error.message).toMatch(message);
        // The refusal quotes the name with its controls shown as text, never raw.
        // eslint-disable-next-line no-control-regex
        expect(r.body.error.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
      }
    }
    expect(await rows()).toEqual(before);
    // A plain name still passes.
    expect((await call('POST', '/api/pools/db-main', { limit: 2 })).status).toBe(200);
  });

  it('refuses them from the CLI with exit 2, naming the field, writing nothing', async () => {
    const before = await rows();
    const cli = (...args: string[]) => runInProcess([...args, '--database-url', db.current.url, '--json']);
    for (const [argv, field] of [
      [['pools', 'set', 'db\u009bx', '2'], 'pool name'],
      [['groups', 'set', 'g\u001b]52;c;eA==\u0007'], 'group'],
      [['projects', 'set', 'p\u202ex', '--weight', '2'], 'project'],
      [['tokens', 'create', '--name', 'ci\u007f', '--scope', 'read'], '--name'],
    ] as const) {
      const r = await cli(...argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(JSON.parse(r.stdout).error.message.startsWith(`${field} "`)).toBe(true);
    }
    expect(await rows()).toEqual(before);
  });

  it("echoes a token's name in scope_lacking with its controls escaped", async () => {
    const reader = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci\u001b]52;c;eA==\u0007\u009b2K', scope: 'read' })).secret;
    const r = await call('GET', '/api/tokens', undefined, reader);
    expect(r.status).toBe(403);
    expect(r.body.error).toEqual({ code: 'scope_lacking', message: 'token ci\\x1b]52;c;eA==\\x07\\u009b2K has scope read; GET /api/tokens needs scope admin' });
  });

  it('answers a 64 KiB request header with 431 and the one error body', async () => {
    const url = new URL(server.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(`GET /api/runs HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${admin}\r\nX-Filler: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
      });
      let out = '';
      socket.on('data', (d) => (out += d));
      socket.on('error', (err) => (out ? resolve(out) : reject(err)));
      socket.on('close', () => resolve(out));
    });
    const [head, body] = raw.split('\r\n\r\n');
    expect(head.split('\r\n')[0]).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(head).toMatch(/^content-type: application\/json/im);
    expect(JSON.parse(body)).toEqual({ error: { code: 'headers_too_large', message: expect.stringMatching(/^request headers larger than \d+ bytes$/) } });
  });

  it(`caps one token's parked log long polls at ${PARKED_LONG_POLLS_PER_TOKEN}: the next is 429, another token and a poll that does not wait still pass`, async () => {
    const reader = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'follower', scope: 'read' })).secret;
    const other = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'other', scope: 'read' })).secret;
    const { runId } = await seedRun(db.current.pool, { steps: [{ name: 'quiet' }] });
    const follow = `/api/runs/${runId}/logs?waitMs=20000`;
    const ctl = new AbortController();
    const refused: Array<{ status: number; headers: Headers; body: any }> = [];
    const parked = Array.from({ length: PARKED_LONG_POLLS_PER_TOKEN }, () => call('GET', follow, undefined, reader, ctl.signal).then((r) => void (r.status === 429 && refused.push(r)), () => undefined));
    try {
      // Each parked poll holds a slot once the server has it; probe until one is refused.
      const deadline = Date.now() + 15_000;
      while (refused.length === 0 && Date.now() < deadline) {
        const probe = await call('GET', `/api/runs/${runId}/logs?waitMs=200`, undefined, reader);
        if (probe.status === 429) refused.push(probe);
      }
      expect(refused[0]?.status).toBe(429);
      expect(refused[0].headers.get('retry-after')).toBe('1');
      expect(refused[0].body.error).toEqual({ code: 'too_many_long_polls', message: `too many long polls parked for this token (at most ${PARKED_LONG_POLLS_PER_TOKEN}); retry when one ends` });
      // A read that does not park, and another token's poll, are not held by this token's cap.
      expect((await call('GET', `/api/runs/${runId}/logs`, undefined, reader)).status).toBe(200);
      expect((await call('GET', `/api/runs/${runId}/logs?waitMs=200`, undefined, other)).status).toBe(200);
    } finally {
      ctl.abort();
      await Promise.all(parked);
    }
    // The slots are given back when the polls end.
    const deadline = Date.now() + 10_000;
    let again = await call('GET', `/api/runs/${runId}/logs?waitMs=200`, undefined, reader);
    while (again.status === 429 && Date.now() < deadline) again = await call('GET', `/api/runs/${runId}/logs?waitMs=200`, undefined, reader);
    expect(again.status).toBe(200);
  });
});
