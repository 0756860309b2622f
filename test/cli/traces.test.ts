import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { ROOT, runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { startTestServer } from '../support/server.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TP = `00-${TRACE}-00f067aa0ba902b7-01`;

describe('runs submit joins the caller\'s trace', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true } });
  });
  afterAll(async () => {
    await server?.stop();
  });
  const hello = join(ROOT, 'examples', 'hello.yaml');
  const cli = (args: string[], env: Record<string, string> = {}) => runCli([...args, '--database-url', db.current.url], { TRACEPARENT: '', ...env });
  const stored = async (id: number) => (await db.current.pool.query(`SELECT trace_id, trace_parent_span, trace_flags FROM runs WHERE id = $1`, [id])).rows[0];

  it('from --traceparent, and runs show names the trace', async () => {
    const r = await cli(['runs', 'submit', hello, '--traceparent', TP, '--json']);
    expect(r.code).toBe(0);
    const view = JSON.parse(r.stdout);
    expect(view.traceId).toBe(TRACE);
    expect(await stored(view.id)).toEqual({ trace_id: TRACE, trace_parent_span: '00f067aa0ba902b7', trace_flags: 1 });
    const shown = await cli(['runs', 'show', String(view.id)]);
    expect(shown.stdout.split('\n')[1]).toBe(`trace ${TRACE}`);
  });

  it('from the TRACEPARENT a CI job exported; a malformed one is set aside with a warning', async () => {
    const joined = JSON.parse((await cli(['runs', 'submit', hello, '--json'], { TRACEPARENT: TP })).stdout);
    expect(joined.traceId).toBe(TRACE);
    const bad = await cli(['runs', 'submit', hello, '--json'], { TRACEPARENT: 'garbage' });
    expect(bad.code).toBe(0);
    expect(bad.stderr).toMatch(/TRACEPARENT ignored: traceparent "garbage": not a traceparent/);
    const own = JSON.parse(bad.stdout);
    expect(own.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(own.traceId).not.toBe(TRACE);
    expect(await stored(own.id)).toMatchObject({ trace_parent_span: null, trace_flags: null });
  });

  it('a malformed --traceparent is bad input: exit 2, nothing written', async () => {
    const before = (await db.current.pool.query(`SELECT count(*)::int AS n FROM runs`)).rows[0].n;
    const r = await cli(['runs', 'submit', hello, '--traceparent', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/the trace id is all zeros/);
    expect((await db.current.pool.query(`SELECT count(*)::int AS n FROM runs`)).rows[0].n).toBe(before);
  });

  it('through the HTTP API as well (--server): the traceparent travels in the body', async () => {
    const { secret } = await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci', scope: 'runs' });
    const r = await runCli(['runs', 'submit', hello, '--traceparent', TP, '--json', '--server', server.url, '--token', secret], { TRACEPARENT: '', OPSCHAIN_SERVER: '', OPSCHAIN_TOKEN: '' });
    expect(r.code).toBe(0);
    const view = JSON.parse(r.stdout);
    expect(view.traceId).toBe(TRACE);
    expect(await stored(view.id)).toEqual({ trace_id: TRACE, trace_parent_span: '00f067aa0ba902b7', trace_flags: 1 });
  });
});
