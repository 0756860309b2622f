import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registeredRoutes, type RouteRecord } from '../../src/api/http.js';
import { serverPlan } from '../../src/features.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { PgLogWatch } from '../support/pg-log.js';
import { useTestDatabase } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';
import { encodeLoose, hostileString, hostileValue, mutate, mutation, plausible, type Schema } from './hostile.js';

/**
 * The fuzz tier of the HTTP edge. Every route the production features register is found through
 * the router (registeredRoutes: fastify's onRoute hook), so a new route is fuzzed without editing
 * this file. Each gets plausible-then-broken inputs under every kind of credential. The promises:
 * never a 5xx; a refusal is one of the statuses below; a refused call changes no row of any
 * table; and PostgreSQL logs no error of class 22 (data) or 42 (syntax/access) for this database.
 */
const SEED = 20_261_201;
/** Cases per route; with ~60 routes this keeps the tier well under two minutes on a loaded machine. */
const CASES_PER_ROUTE = Number(process.env.OPSCHAIN_FUZZ_CASES ?? 40);
// 414: a path parameter longer than the router takes (maxParamLength).
const REFUSALS = new Set([400, 401, 403, 404, 409, 413, 414, 415, 429]);
const SUCCESSES = new Set([200, 201, 202, 204]);

type Credential = 'none' | 'wrong-admin' | 'wrong-runner' | 'registration' | 'runner' | 'read' | 'admin';
const CREDENTIALS: Credential[] = ['none', 'wrong-admin', 'wrong-runner', 'registration', 'runner', 'read', 'admin'];

describe('fuzz: every HTTP route', { timeout: 180_000 }, () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  const secrets: Partial<Record<Credential, string>> = {};
  let countSql = '';
  const pgLog = new PgLogWatch();

  beforeAll(async () => {
    pgLog.mark();
    server = await startTestServer(db.current.url, { plan: serverPlan(), config: { pollWindowMs: 200 } });
    // The routes stay; the loops stop, so every row that changes was changed by a request.
    await server.halt();
    secrets.admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'fuzz-admin' })).secret;
    secrets.read = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'fuzz-read', scope: 'read' })).secret;
    secrets.registration = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'fuzz-reg' })).secret;
    secrets.runner = (await new TestRunner(server.url).register(secrets.registration, { name: 'fuzz-runner' })).credential;
    secrets['wrong-admin'] = 'ocadm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    secrets['wrong-runner'] = 'ocrnr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const { rows } = await db.current.pool.query(`SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace ORDER BY relname`);
    const tables = rows.map((r) => r.relname as string);
    countSql = `SELECT ${tables.map((t) => `(SELECT count(*) FROM ${t})::int AS "${t}"`).join(', ')}`;
  });
  afterAll(async () => server?.stop());

  const counts = async (): Promise<Record<string, number>> => (await db.current.pool.query(countSql)).rows[0];

  function fillPath(url: string, params: Record<string, unknown>): string {
    return url.replace(/:([A-Za-z_]+)/g, (_, k: string) => encodeLoose(String(params[k] ?? 'x')));
  }

  function query(values: Record<string, unknown>): string {
    const parts = Object.entries(values).map(([k, v]) => `${encodeLoose(k)}=${encodeLoose(typeof v === 'string' ? v : JSON.stringify(v) ?? '')}`);
    return parts.length ? `?${parts.join('&')}` : '';
  }

  let cases = 0;
  const failures: string[] = [];

  it('answers hostile input with a refusal, never a 5xx, and a refusal writes nothing', async () => {
    const routes = registeredRoutes(server.app).filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS');
    expect(routes.length).toBeGreaterThan(20);
    let before = await counts();
    for (const [i, route] of routes.entries()) {
      const schema = (route.schema ?? {}) as { body?: Schema; params?: Schema; querystring?: Schema };
      const input = fc.record({
        // Mostly a credential that gets past the door, so the schema and the store are reached.
        credential: fc.oneof({ weight: 4, arbitrary: fc.constant<Credential>('admin') }, { weight: 3, arbitrary: fc.constant<Credential>('runner') }, { weight: 4, arbitrary: fc.constantFrom(...CREDENTIALS) }),
        params: plausible(schema.params ?? { type: 'object', properties: Object.fromEntries([...route.url.matchAll(/:([A-Za-z_]+)/g)].map((m) => [m[1], { type: 'string' }])) }),
        hostileParam: fc.option(hostileString, { freq: 3 }),
        query: plausible(schema.querystring ?? { type: 'object', properties: {} }),
        extraQuery: fc.option(fc.record({ k: fc.constantFrom('limit', 'extra', '__proto__', 'id'), v: hostileValue }), { freq: 3 }),
        body: plausible(schema.body ?? { type: 'object', properties: {} }),
        mutation,
        contentType: fc.constantFrom('application/json', 'application/json', 'application/json', 'text/plain', 'application/x-www-form-urlencoded'),
      });
      const t0 = Date.now();
      const outcome = await fc.check(
        fc.asyncProperty(input, async (c) => {
          cases++;
          const params = { ...(c.params as Record<string, unknown>) };
          if (c.hostileParam !== null) {
            const keys = Object.keys(params);
            if (keys.length) params[keys[0]] = c.hostileParam;
          }
          const q = { ...(c.query as Record<string, unknown>) };
          if (c.extraQuery) q[c.extraQuery.k] = c.extraQuery.v;
          const url = fillPath(route.url, params) + query(q);
          const withBody = route.method !== 'GET' && route.method !== 'DELETE';
          const headers: Record<string, string> = {};
          const secret = secrets[c.credential];
          if (secret) headers.authorization = `Bearer ${secret}`;
          if (withBody) headers['content-type'] = c.contentType;
          const res = await server.app.inject({ method: route.method as 'GET', url, headers, ...(withBody ? { payload: mutate(c.body, c.mutation) } : {}) });
          const what = `${route.method} ${route.url} as ${c.credential}: ${res.statusCode} ${res.body.slice(0, 300)}`;
          if (!REFUSALS.has(res.statusCode) && !SUCCESSES.has(res.statusCode)) throw new Error(what);
          const after = await counts();
          if (REFUSALS.has(res.statusCode)) {
            if (res.statusCode === 400) {
              const body = JSON.parse(res.body) as { error?: string | { message?: string } };
              const message = typeof body.error === 'string' ? body.error : body.error?.message;
              if (!message || /internal/.test(message)) throw new Error(`400 without a reason: ${what}`);
            }
            const changed = Object.keys(after).filter((t) => after[t] !== before[t]);
            if (changed.length) throw new Error(`refused call changed the row count of ${changed.join(', ')}: ${what}`);
          }
          before = after;
        }),
        { seed: SEED + i, numRuns: CASES_PER_ROUTE, endOnFailure: true },
      );
      if (process.env.OPSCHAIN_FUZZ_TIMING) console.log(`${route.method} ${route.url}: ${Date.now() - t0} ms`);
      // Every route is fuzzed even when one fails; each failure is reported with its case.
      if (outcome.failed) failures.push(String((outcome.errorInstance as Error | undefined)?.message ?? 'failed').slice(0, 600));
    }
    console.log(`fuzz: ${cases} HTTP cases over ${routes.length} routes (seed ${SEED}, ${CASES_PER_ROUTE} per route)`);
    expect(failures).toEqual([]);
  });

  it('left no error of class 22 or 42 in the PostgreSQL log for this database', (t) => {
    // An external server's log is not ours to read; CI's embedded run covers this.
    pgLog.expectClean(db.current.name, t);
  });

  it('covers every registered route', () => {
    const routes: RouteRecord[] = registeredRoutes(server.app);
    expect(routes.map((r) => `${r.method} ${r.url}`)).toEqual(expect.arrayContaining(['POST /api/runner/register', 'POST /api/runner/logs', 'GET /healthz']));
  });
});
