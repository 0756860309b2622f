import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { stepLogAppend } from '../../src/store/logs.js';
import type { Pool } from '../../src/store/pool.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { ROOT } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';
import { runInProcess } from '../support/inproc.js';
import { complete, deliver } from '../support/lifecycle.js';
import { startTestServer } from '../support/server.js';

type Side = 'store' | 'http';
interface Row {
  /** The verb and its arguments; a function when an argument differs per side (an id). */
  args: string[] | ((side: Side) => string[]);
  /** Done to both stores before the verb, so both sides start from the same state. */
  setup?: (pool: Pool, side: Side) => Promise<void>;
  code?: number;
  /** Fields that depend on timing here (a replica's heartbeat state without a coordination loop). */
  vary?: string[];
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const VARYING = new Set(['lastUsedAt', 'waitedMs', 'durationMs', 'heartbeatAgeMs', 'waitingMs', 'createdBy', 'actor', 'secret', 'id', 'address', 'httpAddress', 'host', 'version', 'traceId']);

/** What legitimately differs between two stores: times, the actor, secrets and generated ids (a run's random trace id among them). */
function normalise(v: unknown, key = '', vary: string[] = []): unknown {
  if (vary.includes(key)) return `<${key}>`;
  if (Array.isArray(v)) return v.map((x) => normalise(x, '', vary));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normalise(x, k, vary)]));
  if (VARYING.has(key) && (key !== 'id' || typeof v !== 'number')) return `<${key}>`;
  if (typeof v === 'string' && ISO.test(v)) return '<time>';
  if (typeof v === 'string' && /^(tok_[0-9a-f]+|[\w.-]+-[0-9a-f]{6})$/.test(v)) return '<generated id>';
  return v;
}

describe('every verb, through the store and through the HTTP API, answers the same', () => {
  const a = useTestDatabase();
  const b = useTestDatabase();
  const home = mkdtempSync(join(tmpdir(), 'opschain-remote-home-'));
  let server: ServerHandle;
  let local: ServerHandle;
  let token: string;
  const tokenIds: Record<Side, string> = { store: '', http: '' };
  const replicaIds: Record<Side, string> = { store: '', http: '' };

  beforeAll(async () => {
    server = await startTestServer(b.current.url, { plan: { ops: true } });
    // A replica row in the other store too, so `admin status` has the same shape on both sides.
    local = await startTestServer(a.current.url);
    replicaIds.http = server.replica.replicaId;
    replicaIds.store = local.replica.replicaId;
    const made = await tokenCreate(b.current.pool, { kind: 'admin', name: 'harness', scope: 'admin' });
    token = made.secret;
    tokenIds.http = made.token.id;
    tokenIds.store = (await tokenCreate(a.current.pool, { kind: 'admin', name: 'harness', scope: 'admin' })).token.id;
  });
  afterAll(async () => {
    await server?.stop();
    await local?.stop();
    rmSync(home, { recursive: true, force: true });
  });

  const run = async (side: Side, row: Row) => {
    const pool = side === 'store' ? a.current.pool : b.current.pool;
    await row.setup?.(pool, side);
    const args = typeof row.args === 'function' ? row.args(side) : row.args;
    const transport = side === 'store' ? ['--database-url', a.current.url] : ['--server', server.url, '--token', token, '--home', home];
    return runInProcess([...args, ...transport]);
  };

  const hello = join(ROOT, 'examples', 'hello.yaml');
  const failing = join(ROOT, 'examples', 'failing.yaml');
  const backup = join(ROOT, 'examples', 'nightly-backup.yaml');
  const rows: Row[] = [
    { args: ['pools', 'set', 'db', '3', '--json'] },
    { args: ['pools', 'list', '--json'] },
    { args: ['pools', 'unset', 'db', '--json'] },
    { args: ['pools', 'set', 'db', 'three', '--json'], code: 2 },
    { args: ['projects', 'set', 'acme', '--weight', '2.5', '--json'] },
    { args: ['projects', 'list', '--json'] },
    { args: ['projects', 'set', 'acme', '--weight', '0', '--json'], code: 2 },
    { args: ['groups', 'set', 'prod', '--attr', 'location=dc1', '--exclusive', '--json'] },
    { args: ['groups', 'list', '--json'] },
    { args: ['placement', 'bind', 'acme/prod/', '--group', 'prod', '--label', 'linux', '--json'] },
    { args: ['placement', 'list', '--json'] },
    { args: ['placement', 'unbind', 'acme/prod', '--json'] },
    { args: ['placement', 'bind', 'acme//prod', '--group', 'g', '--json'], code: 2 },
    { args: ['fleet', 'drain', 'builder', '--reason', 'patching', '--json'], setup: (pool) => insertRunner(pool, { id: 'r-1', name: 'builder', labels: ['linux'] }) },
    { args: ['fleet', 'drain', 'r-1', '--json'] },
    { args: ['fleet', 'drain', 'ghost', '--json'], code: 3 },
    { args: ['fleet', 'drain', '--group', 'nosuchgroup', '--json'], code: 3 },
    { args: ['fleet', 'drain', '--group', 'prod', '--dry-run', '--json'] },
    { args: ['fleet', 'drain', '--group', 'prod', '--json'] },
    { args: ['fleet', 'drain', '--group', 'prod', '--wait', '--timeout', '5s', '--json'] },
    { args: ['fleet', 'undrain', '--group', 'prod', '--json'] },
    { args: ['runs', 'submit', hello, '--set', 'project=acme', '--json'] },
    { args: ['fleet', 'queue', '--json'] },
    { args: ['fleet', 'demand', '--json'] },
    { args: ['fleet', 'demand', '--group', 'nosuchgroup', '--json'], code: 3 },
    { args: ['fleet', 'what-if', '--undrain', 'r-1', '--weight', 'acme=3', '--add-runners', '2', '--group', 'prod', '--label', 'linux', '--json'] },
    { args: ['fleet', 'what-if', '--drain', 'ghost', '--json'], code: 3 },
    { args: ['fleet', 'what-if', '--weight', 'acme=lots', '--json'], code: 2 },
    { args: ['fleet', 'undrain', 'r-1', '--json'] },
    { args: ['fleet', 'drain', 'r-1', '--dry-run', '--json'] },
    { args: ['fleet', 'drain', 'builder', '--wait', '--timeout', '5s', '--json'], vary: ['waitedMs'] },
    { args: ['fleet', 'undrain', 'r-1', '--json'] },
    { args: ['runs', 'show', '1', '--json'] },
    {
      args: ['runs', 'logs', '1', '--json'],
      setup: async (pool) => {
        const lease = await deliver(pool, { run: 1, step: 'hello', runnerId: 'r-1' });
        await stepLogAppend(pool, { stepId: lease.stepId, attempt: 1, chunks: [{ stream: 'stdout', text: 'hello\n' }] });
        await complete(pool, lease, { status: 'succeeded', runnerId: 'r-1' });
      },
    },
    { args: ['runs', 'logs', '1', '--follow', '--json'] },
    { args: ['runs', 'show', '1', '--json'] },
    { args: ['runs', 'submit', failing, '--json'] },
    { args: ['runs', 'cancel', '2', '--json'] },
    { args: ['runs', 'cancel', '2', '--json'] },
    { args: ['runs', 'retry', '2', '--json'] },
    { args: ['runs', 'list', '--json'] },
    { args: ['runs', 'list', '--status', 'succeeded', '--limit', '1', '--json'] },
    { args: ['runs', 'show', '424242', '--json'], code: 3 },
    { args: ['runs', 'logs', '1', '--step', 'nope', '--json'], code: 3 },
    { args: ['fleet', 'quiesce', '--reason', 'deploy', '--json'] },
    // The former name (deprecated) is the same verb.
    { args: ['admin', 'server', 'quiesce', '--json'] },
    { args: ['fleet', 'resume', '--json'] },
    { args: ['admin', 'platform', 'halt', '--reason', 'failover', '--json'] },
    { args: ['admin', 'platform', 'resume', '--json'] },
    { args: ['admin', 'platform', 'quiesce', '--reason', 'store upgrade', '--until', '30m', '--json'] },
    { args: ['admin', 'platform', 'resume', '--json'] },
    { args: ['fleet', 'quiesce', '--until', 'soon', '--json'], code: 2 },
    { args: ['admin', 'status', '--json'], vary: ['state'] },
    { args: ['admin', 'queue', '--json', '--limit', '5'], vary: ['state', 'live', 'lastSeenAgeMs', 'ageMs', 'oldestAgeMs', 'oldestWaitingMs', 'expiresInMs'] },
    { args: ['admin', 'queue', '--json', '--limit', '0'], code: 2 },
    { args: ['fleet', 'runners', '--json'], vary: ['lastSeenAgeMs'] },
    { args: (side) => ['admin', 'replica', 'quiesce', replicaIds[side], '--json'] },
    { args: (side) => ['admin', 'replica', 'resume', replicaIds[side], '--json'] },
    { args: ['admin', 'replica', 'quiesce', 'nosuch-000000', '--json'], code: 3 },
    { args: ['tokens', 'create', '--name', 'ci-deploy', '--scope', 'levers', '--expires', '30d', '--json'] },
    { args: ['tokens', 'create', '--name', 'fleet', '--registration', '--json'] },
    { args: ['tokens', 'create', '--name', 'x', '--scope', 'levers', '--expires', 'soon', '--json'], code: 2 },
    { args: ['tokens', 'list', '--json'] },
    { args: (side) => ['tokens', 'revoke', tokenIds[side], '--json'], setup: async (pool, side) => void (tokenIds[side] = (await tokenCreate(pool, { kind: 'admin', name: 'old', scope: 'read' })).token.id) },
    { args: ['tokens', 'revoke', 'tok_000000000000', '--json'], code: 3 },
    { args: ['admin', 'audit', '--limit', '4', '--json'], vary: ['source', 'id'] },
    { args: ['admin', 'audit', '--since', '1h', '--actor', 'nobody-at-all', '--json'] },
    { args: ['admin', 'audit', '--since', 'soon', '--json'], code: 2 },
    { args: ['fleet', 'runners', 'remove', 'builder', '--reason', 'retired', '--json'] },
    { args: ['fleet', 'runners', 'remove', 'builder', '--json'], code: 3 },
    { args: ['templates', 'put', backup, '--json'] },
    { args: ['templates', 'put', backup, '--max-concurrent-runs', '1', '--daily-ceiling', '4', '--json'] },
    { args: ['templates', 'put', failing, '--name', 'bad name', '--json'], code: 2 },
    { args: ['templates', 'list', '--json'] },
    { args: ['templates', 'show', 'nightly-backup', '--version', '1', '--json'] },
    { args: ['templates', 'show', 'nosuch', '--json'], code: 3 },
    { args: ['triggers', 'schedule', 'add', 'nightly-backup', '--cron', '0 2 * * *', '--tz', 'Europe/Berlin', '--catch-up', 'last', '--json'] },
    { args: ['triggers', 'schedule', 'add', 'nightly-backup', '--cron', '61 2 * * *', '--json'], code: 2 },
    { args: ['triggers', 'schedule', 'add', 'nightly-backup', '--cron', '0 2 * * *', '--tz', 'Mars/Olympus', '--json'], code: 2 },
    { args: ['triggers', 'once', 'add', 'nightly-backup', '--at', '+1h', '--set', 'env.TARGET=replica', '--json'] },
    { args: ['triggers', 'once', 'add', 'nightly-backup', '--at', 'tomorrow', '--json'], code: 2 },
    // A webhook's owner is the caller's token over HTTP, none with the store's URL.
    { args: ['triggers', 'webhook', 'add', 'nightly-backup', '--map', 'env.TARGET=$.target', '--url', 'http://hooks.example', '--json'], vary: ['owner'] },
    { args: ['triggers', 'list', '--json'], vary: ['owner'] },
    { args: ['triggers', 'disable', '1', '--json'] },
    { args: ['triggers', 'enable', '1', '--json'] },
    { args: ['triggers', 'show', '1', '--json'] },
    { args: ['triggers', 'show', '424242', '--json'], code: 3 },
    { args: ['triggers', 'webhook', 'rotate', '3', '--json'], vary: ['owner'] },
    { args: ['triggers', 'webhook', 'rotate', '1', '--json'], code: 2 },
    { args: ['templates', 'remove', 'nightly-backup', '--json'], code: 4 },
    { args: ['triggers', 'remove', '3', '--json'] },
    { args: ['admin', 'reconcile', '--json'] },
  ];

  it.each(rows.map((r) => [(typeof r.args === 'function' ? r.args('store') : r.args).join(' '), r] as const))('%s', async (_name, row) => {
    const viaStore = await run('store', row);
    const viaHttp = await run('http', row);
    const parse = (r: { stdout: string; stderr: string }) => {
      const text = r.stdout.trim();
      if (!text) throw new Error(`no output; stderr: ${r.stderr}`);
      try {
        return [JSON.parse(text)];
      } catch {
        // --follow --json is NDJSON: one object per line.
        return text.split('\n').map((l) => JSON.parse(l));
      }
    };
    expect({ code: viaStore.code, stderr: viaStore.stderr }).toEqual({ code: row.code ?? 0, stderr: '' });
    expect({ code: viaHttp.code, stderr: viaHttp.stderr }).toEqual({ code: row.code ?? 0, stderr: '' });
    expect(normalise(parse(viaHttp), '', row.vary)).toEqual(normalise(parse(viaStore), '', row.vary));
    if (row.code) expect(parse(viaStore)[0]).toEqual({ error: { code: expect.any(String), message: expect.any(String) } });
  });

  it('nothing run with --server wrote anything in the local home', () => {
    expect(readdirSync(home)).toEqual([]);
  });
});
