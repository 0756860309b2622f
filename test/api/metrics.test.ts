import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exposition } from '../../src/api/metrics.js';
import { DEMAND_REASONS, NO_GROUP, UNMATCHED } from '../../src/core/capacity.js';
import { classify } from '../../src/core/classify.js';
import { LANE_NAMES } from '../../src/core/entry.js';
import { expireOnce } from '../../src/dispatch/lifecycle.js';
import { postureLever } from '../../src/ops/domain/postures.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerHandle } from '../../src/server.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { queueEnqueue } from '../../src/store/queue.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { parsePrometheus, sampleValue, type Family } from '../support/prom.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun } from '../support/seed.js';
import { justPast } from '../support/lifecycle.js';
import { startTestServer } from '../support/server.js';

/** 1,000 one-step runs spread over the three lanes, enqueued as the orchestrator would. */
async function seedRuns(pool: ServerHandle['replica']['pool'], n: number): Promise<number[]> {
  const priorities = [0, 60, 120];
  const { rows: runs } = await pool.query(
    `INSERT INTO runs (name, priority, definition) SELECT 'bulk-' || i, (ARRAY[0, 60, 120])[1 + i % 3], '{}' FROM generate_series(1, $1) i RETURNING id, priority`,
    [n],
  );
  const { rows: steps } = await pool.query(
    `INSERT INTO steps (run_id, name, command, status, attempt) SELECT id, 'only', 'true', 'ready', 1 FROM unnest($1::bigint[]) id RETURNING id, run_id`,
    [runs.map((r) => r.id)],
  );
  const priorityOf = new Map(runs.map((r) => [Number(r.id), Number(r.priority)]));
  await queueEnqueue(
    pool,
    steps.map((s) => {
      const priority = priorityOf.get(Number(s.run_id)) ?? priorities[0];
      return {
        stepId: Number(s.id),
        runId: Number(s.run_id),
        attempt: 1,
        ...classify({ run: { project: 'default', priority, scope: 'step', maxParallelSteps: 1, placement: null, target: null }, step: { priority: null, placement: null, pools: [], load: 1 }, bindings: [] }),
      };
    }),
  );
  return [...runs.map((r) => Number(r.id)), ...steps.map((s) => Number(s.id))];
}

/** Label values every opschain_ family may carry: closed sets, never an id. */
const ALLOWED: Record<string, (v: string) => boolean> = {
  lane: (v) => (LANE_NAMES as readonly string[]).includes(v),
  outcome: (v) => ['offer', 'empty', 'held', 'fenced', 'ok', 'failed'].includes(v),
  call: (v) => ['ack', 'renew', 'complete', 'release', 'logs'].includes(v),
  status: (v) => ['succeeded', 'failed', 'system_error'].includes(v) || /^[1-5]\d\d$/.test(v),
  reason: (v) => ['runner_lost', 'ack_deadline', 'claim_expired', ...DEMAND_REASONS].includes(v),
  // Runner groups that exist (none here), runners with no group, work no runner matches.
  group: (v) => [NO_GROUP, UNMATCHED].includes(v),
  kind: (v) => ['unavailable', 'query'].includes(v),
  stage: (v) => ['claimed', 'delivered', 'executing'].includes(v),
  state: (v) => ['online', 'watch', 'offline', 'idle', 'busy', 'drained'].includes(v),
  posture: (v) => ['fleet_quiesced', 'platform_halted', 'system_quiesced'].includes(v),
  method: (v) => ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'].includes(v),
  // Route templates as registered, or "unmatched": never a concrete id.
  route: (v) => v === 'unmatched' || /^\/[a-z0-9/_:-]*$/.test(v),
  pool: (v) => /^[a-z]+$/.test(v),
  le: () => true,
};

describe('GET /metrics', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let admin: string;
  let reg: string;

  beforeAll(async () => {
    server = await startTestServer(db.current.url, {
      plan: { metrics: {}, ops: true, dispatch: { hooks: orchestratorHooks } },
      config: { leaseTtlMs: 60_000, pollWindowMs: 10_000 },
    });
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ops' })).secret;
    reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'r' })).secret;
  });
  afterAll(async () => server?.stop());

  const scrape = async (): Promise<Map<string, Family>> => {
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parsePrometheus(await res.text());
  };
  const opschainSeries = (fams: Map<string, Family>) =>
    [...fams.values()].filter((f) => f.name.startsWith('opschain_') && !f.name.startsWith('opschain_process_') && !f.name.startsWith('opschain_nodejs_')).flatMap((f) => f.samples);

  it('is open without a token and declares every family it reports', async () => {
    const fams = await scrape();
    for (const name of [
      'opschain_queue_ready_depth',
      'opschain_queue_oldest_wait_seconds',
      'opschain_ready_to_delivered_wait_seconds',
      'opschain_acquire_outcomes_total',
      'opschain_completions_total',
      'opschain_lease_expiries_total',
      'opschain_lease_table_vacuums_total',
      'opschain_pool_holds',
      'opschain_pool_limit',
      'opschain_runners',
      'opschain_shards_owned',
      'opschain_leader',
      'opschain_posture',
      'opschain_store_errors_total',
      'opschain_store_query_duration_seconds',
      'opschain_http_requests_total',
    ]) {
      expect(fams.get(name), name).toBeDefined();
    }
    // A lone replica without coordination owns every shard and leads.
    expect(sampleValue(fams, 'opschain_shards_owned')).toBe(64);
    expect(sampleValue(fams, 'opschain_leader')).toBe(1);
    expect(sampleValue(fams, 'opschain_store_up')).toBe(1);
  });

  it('depth per lane matches the fleet queue, and 1,000 runs leave label cardinality bounded', async () => {
    const before = opschainSeries(await scrape()).length;
    const ids = await seedRuns(db.current.pool, 1_000);
    await db.current.pool.query(`INSERT INTO pool_limits (name, max_holders) VALUES ('db', 2)`);
    const fams = await scrape();
    const get = async (path: string) => (await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${admin}` } })).json() as Promise<any>;
    const view = (await get('/api/fleet/queue?limit=5000')) as { summary: { ready: number }; entries: Array<{ state: string; lane: string; waitingMs: number }> };
    const adminView = (await get('/api/admin/queue')) as { lanes: Array<{ lane: string; ready: number; readyEstimated: boolean; oldestAgeMs: number | null }> };
    expect(view.summary.ready).toBe(1_000);
    let total = 0;
    for (const lane of LANE_NAMES) {
      const depth = sampleValue(fams, 'opschain_queue_ready_depth', { lane });
      const a = adminView.lanes.find((l) => l.lane === lane)!;
      // The same read as `admin queue`, exact at this depth, and the same as the fleet queue's count.
      expect(depth, lane).toBe(a.ready);
      expect(a.readyEstimated).toBe(false);
      expect(sampleValue(fams, 'opschain_queue_ready_depth_estimated', { lane })).toBe(0);
      expect(depth, lane).toBe(view.entries.filter((e) => e.state === 'ready' && e.lane === lane).length);
      expect(depth).toBeGreaterThan(300);
      total += depth!;
      const oldest = sampleValue(fams, 'opschain_queue_oldest_wait_seconds', { lane })!;
      expect(oldest).toBeGreaterThanOrEqual(0);
      // Read moments apart: the ages agree to well within the time between the reads.
      expect(Math.abs(oldest - a.oldestAgeMs! / 1000)).toBeLessThan(30);
    }
    expect(total).toBe(view.summary.ready);
    expect(sampleValue(fams, 'opschain_pool_limit', { pool: 'db' })).toBe(2);

    // Deliver and finish some of them through a runner: per-run activity must not add series per run.
    const r = await new TestRunner(server.url).register(reg, { max_load: 20 });
    for (let i = 0; i < 3; i++) {
      const { body } = await r.acquire({ max_offers: 20 });
      await r.call('ack', { leases: body.offers.map((o: any) => ({ step_id: o.step_id, token: o.token })) });
      await r.call('complete', { completions: body.offers.map((o: any, j: number) => ({ step_id: o.step_id, token: o.token, exit_code: j % 2 })) });
    }
    const after = await scrape();
    const series = opschainSeries(after);
    const idSet = new Set([...ids.map(String), r.runnerId]);
    for (const s of series) {
      for (const [k, v] of Object.entries(s.labels)) {
        expect(ALLOWED[k]?.(v), `${s.name} ${k}=${v}`).toBe(true);
        if (k !== 'le' && k !== 'status') expect(idSet.has(v), `${s.name} carries an id: ${k}=${v}`).toBe(false);
      }
    }
    // Bounded: the same order of series as an empty store, not one per run.
    expect(series.length).toBeLessThan(before + 120);
    expect(series.length).toBeLessThan(400);
    const delivered = LANE_NAMES.reduce((n, lane) => n + (sampleValue(after, 'opschain_ready_to_delivered_wait_seconds', { lane }, 'opschain_ready_to_delivered_wait_seconds_count') ?? 0), 0);
    expect(delivered).toBe(60);
    expect(sampleValue(after, 'opschain_completions_total', { status: 'succeeded' })).toBe(30);
    expect(sampleValue(after, 'opschain_completions_total', { status: 'failed' })).toBe(30);
    expect(sampleValue(after, 'opschain_acquire_outcomes_total', { outcome: 'offer' })).toBe(3);
    expect(LANE_NAMES.reduce((n, lane) => n + sampleValue(after, 'opschain_queue_ready_depth', { lane })!, 0)).toBe(940);
    // System lane first: the 60 delivered came from the system lane (priority 120, 333 entries).
    expect(sampleValue(after, 'opschain_ready_to_delivered_wait_seconds', { lane: 'system' }, 'opschain_ready_to_delivered_wait_seconds_count')).toBe(60);
    expect(sampleValue(after, 'opschain_http_requests_total', { method: 'POST', route: '/api/runner/acquire', status: '200' })).toBe(3);
    expect(sampleValue(after, 'opschain_runners', { state: 'online' })).toBe(1);
    await db.current.pool.query(`DELETE FROM queue_ready`);
  });

  it('counts held, empty and fenced answers, expiries, postures and store errors', async () => {
    const r = await new TestRunner(server.url).register(reg, { name: 'metrics-runner' });
    const count = (f: Map<string, Family>, name: string, labels: Record<string, string>) => sampleValue(f, name, labels) ?? 0;
    // A drained runner's poll is held. The drain reaches the credential this replica cached at
    // registration by a notice, milliseconds after the commit, not with it: wait until it has.
    const drained = await new TestRunner(server.url).register(reg, { name: 'drained-runner' });
    await fleetDrainSet(db.current.pool, { runner: drained.runnerId, drained: true, actor: 'test' });
    await waitFor(
      async () => {
        const held = count(await scrape(), 'opschain_acquire_outcomes_total', { outcome: 'held' });
        expect((await drained.acquire({ wait_ms: 0 })).status).toBe(204);
        return count(await scrape(), 'opschain_acquire_outcomes_total', { outcome: 'held' }) > held;
      },
      { timeoutMs: 10_000, what: 'the drain to reach the cached credential' },
    );
    const base = await scrape();

    expect((await r.acquire({ wait_ms: 0 })).status).toBe(204);
    const renew = await r.call('renew', { leases: [{ step_id: 999_999, token: '1' }] });
    expect(renew.body.results[0]).toMatchObject({ ok: false, status: 409 });
    expect((await drained.acquire({ wait_ms: 0 })).status).toBe(204);

    // An offer never acked past its deadline comes back through the expiry sweep.
    await seedRun(db.current.pool, { steps: [{ name: 'unacked' }] });
    const offered = await r.acquire({ wait_ms: 5_000 });
    expect(offered.status).toBe(200);
    expect((await expireOnce(server.replica.dispatcher!, { now: await justPast(db.current.pool, 'ack_deadline') })).requeued).toBe(1);

    await postureLever(db.current.pool, { fields: ['system_quiesced'], value: true, actor: 'test' });
    // Lifted whatever the outcome, so a failure here does not starve the tests after it.
    try {
      await server.replica.pool.query('SELECT * FROM no_such_table').catch(() => {});

      const after = await scrape();
      expect(count(after, 'opschain_acquire_outcomes_total', { outcome: 'empty' }) - count(base, 'opschain_acquire_outcomes_total', { outcome: 'empty' })).toBe(1);
      expect(count(after, 'opschain_acquire_outcomes_total', { outcome: 'held' }) - count(base, 'opschain_acquire_outcomes_total', { outcome: 'held' })).toBe(1);
      expect(count(after, 'opschain_acquire_outcomes_total', { outcome: 'fenced' }) - count(base, 'opschain_acquire_outcomes_total', { outcome: 'fenced' })).toBe(1);
      expect(count(after, 'opschain_lease_fenced_total', { call: 'renew' })).toBe(1);
      expect(count(after, 'opschain_lease_expiries_total', { reason: 'ack_deadline' }) - count(base, 'opschain_lease_expiries_total', { reason: 'ack_deadline' })).toBe(1);
      expect(count(after, 'opschain_posture', { posture: 'system_quiesced' })).toBe(1);
      expect(count(after, 'opschain_posture', { posture: 'platform_halted' })).toBe(0);
      expect(count(after, 'opschain_store_errors_total', { kind: 'query' }) - count(base, 'opschain_store_errors_total', { kind: 'query' })).toBe(1);
      expect(count(after, 'opschain_http_requests_total', { method: 'POST', route: '/api/runner/renew', status: '200' })).toBeGreaterThanOrEqual(1);
      const latency = after.get('opschain_store_query_duration_seconds')!.samples.find((s) => s.name.endsWith('_count'))!.value;
      expect(latency).toBeGreaterThan(sampleValue(base, 'opschain_store_query_duration_seconds', {}, 'opschain_store_query_duration_seconds_count')!);
    } finally {
      await postureLever(db.current.pool, { fields: ['system_quiesced'], value: false, actor: 'test' });
    }
  });

  it('labels only pools defined with pools set: a run file naming 200 other pools adds to one pool="other" series', async () => {
    const made = Array.from({ length: 200 }, (_, i) => `made${String.fromCharCode(97 + (i % 26))}${String.fromCharCode(97 + Math.floor(i / 26))}`);
    await db.current.pool.query(`INSERT INTO pool_limits (name, max_holders) VALUES ('db', 2) ON CONFLICT (name) DO UPDATE SET max_holders = 2`);
    await db.current.pool.query(`DELETE FROM queue_ready`);
    const before = opschainSeries(await scrape()).length;
    const file = `name: many-pools\nsteps:\n  s:\n    run: 'true'\n    pools: [db, ${made.join(', ')}]\n`;
    const submitted = await fetch(`${server.url}/api/runs`, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, body: JSON.stringify({ file }) });
    expect(submitted.status).toBe(200);
    const r = await new TestRunner(server.url).register(reg, { name: 'pool-runner' });
    const offered = await r.acquire({ wait_ms: 5_000 });
    expect(offered.status).toBe(200);
    // The step holds all 201 pools now.
    expect((await db.current.pool.query(`SELECT count(*)::int AS n FROM pool_holds`)).rows[0].n).toBe(201);

    const fams = await scrape();
    const holds = fams.get('opschain_pool_holds')!.samples;
    expect(holds.map((h) => h.labels.pool).sort()).toEqual(['db', 'other']);
    expect(sampleValue(fams, 'opschain_pool_holds', { pool: 'db' })).toBe(1);
    expect(sampleValue(fams, 'opschain_pool_holds', { pool: 'other' })).toBe(200);
    expect(fams.get('opschain_pool_limit')!.samples.map((h) => h.labels.pool)).toEqual(['db']);
    // No made-up name reaches the endpoint, and the series count did not grow with them.
    const text = await (await fetch(`${server.url}/metrics`)).text();
    for (const name of made) expect(text).not.toContain(name);
    expect(opschainSeries(fams).length).toBeLessThanOrEqual(before + 10);

    // Defined later with pools set, a pool gets its own series; the rest stay together.
    await db.current.pool.query(`INSERT INTO pool_limits (name, max_holders) VALUES ($1, 5)`, [made[0]]);
    const defined = await scrape();
    expect(sampleValue(defined, 'opschain_pool_holds', { pool: made[0] })).toBe(1);
    expect(sampleValue(defined, 'opschain_pool_holds', { pool: 'other' })).toBe(199);
  });
});

describe('the exposition text', () => {
  it('spells a NaN sample NaN, as the format does, and leaves comments and other values alone', () => {
    const text = ['# HELP x_lag lag, or Nan', '# TYPE x_lag gauge', 'x_lag Nan', 'x_other{a="b Nan"} 1', 'x_nan_total 3', ''].join('\n');
    expect(exposition(text).split('\n')).toEqual(['# HELP x_lag lag, or Nan', '# TYPE x_lag gauge', 'x_lag NaN', 'x_other{a="b Nan"} 1', 'x_nan_total 3', '']);
  });
});
