import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { serverPlan } from '../../src/features.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { ServerHandle } from '../../src/server.js';
import { fleetDrainSet, fleetQueueRead } from '../../src/store/fleet.js';
import { groupSet } from '../../src/store/groups.js';
import { placementBind } from '../../src/store/placement.js';
import { poolLimitSet } from '../../src/store/pools.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { buildFleetQueue } from '../../src/views/fleet-queue.js';
import { truncateLive, useTestDatabase } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';

interface OfferBody { step_id: number; run_id: number; step: string; token: string }

describe('dispatch policy through the runner protocol', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let reg: string;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: serverPlan(), config: { pollWindowMs: 10_000 } });
    reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 't' })).secret;
  });
  afterAll(async () => server?.stop());
  beforeEach(async () => {
    await truncateLive(db.current.pool, 'queue_ready, step_leases, pool_holds, pool_limits, run_pins');
  });

  const register = (name: string, extra: Record<string, unknown> = {}) => new TestRunner(server.url).register(reg, { name, max_load: 4, ...extra });
  const submit = (yaml: string) => runSubmit(db.current.pool, runFileLoad(yaml), { actor: 'test' });
  const offers = async (r: TestRunner, body: Record<string, unknown> = {}): Promise<OfferBody[]> => {
    const res = await r.acquire({ max_offers: 4, wait_ms: 8_000, ...body });
    return res.status === 204 ? [] : res.body.offers;
  };
  /** An acquire answered empty: its window passed with a dispatch tick run (acquire kicks one) and nothing matched. */
  const empty = async (r: TestRunner, body: Record<string, unknown> = {}) => (await r.acquire({ max_offers: 4, wait_ms: 600, ...body })).status === 204;
  const complete = (r: TestRunner, os: OfferBody[]) => r.call('complete', { completions: os.map((o) => ({ step_id: o.step_id, token: o.token, exit_code: 0 })) });
  const verdicts = async () => new Map(buildFleetQueue(await fleetQueueRead(db.current.pool), { acceptExceeding: true }).entries.map((e) => [e.stepId, e.verdict]));

  it("an exclusive group's runner never takes untargeted work", async () => {
    await groupSet(db.current.pool, { name: 'vault', exclusive: true });
    // Joining an exclusive group takes a registration token issued for it.
    const vaultReg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'vault', groups: ['vault'] })).secret;
    const excl = await new TestRunner(server.url).register(vaultReg, { name: 'vault-1', max_load: 4, group: 'vault' });
    const plain = await register('plain-1', { labels: ['x-excl'] });
    const untargeted = await submit('name: u\nsteps:\n  s: { run: "true", placement: { labels: [x-excl] } }\n');
    const targeted = await submit('name: t\nplacement: { group: vault }\nsteps:\n  s: { run: "true" }\n');
    const got = await offers(excl);
    expect(got.map((o) => o.run_id)).toEqual([targeted.runId]);
    expect(await empty(excl)).toBe(true);
    const v = await verdicts();
    expect([...v.values()].filter((x) => x.code === 'waiting_for_tick')).toHaveLength(1);
    expect((await offers(plain)).map((o) => o.run_id)).toEqual([untargeted.runId]);
  });

  it('a drained runner, or a runner of a drained group, gets empty polls until undrained', async () => {
    const solo = await register('drain-solo', { labels: ['x-drain'] });
    await fleetDrainSet(db.current.pool, { runner: solo.runnerId, drained: true, reason: 'patching', actor: 'test' });
    const { runId } = await submit('name: d\nsteps:\n  s: { run: "true", placement: { labels: [x-drain] } }\n');
    expect(await empty(solo)).toBe(true);
    expect([...(await verdicts()).values()][0]).toMatchObject({ code: 'all_matches_drained', reason: 'every matching runner drained (drain-solo: patching)' });

    const member = await register('drain-member', { labels: ['x-drain'], group: 'racks' });
    await fleetDrainSet(db.current.pool, { group: 'racks', drained: true, actor: 'test' });
    expect(await empty(member)).toBe(true);
    await fleetDrainSet(db.current.pool, { group: 'racks', drained: false, actor: 'test' });
    expect((await offers(member)).map((o) => o.run_id)).toEqual([runId]);
    await fleetDrainSet(db.current.pool, { runner: solo.runnerId, drained: false, actor: 'test' });
  });

  it('a run pinned with max_parallel_steps 2 runs its parallel branches on one runner, never three at once', async () => {
    const a = await register('pin-a', { labels: ['x-pin'] });
    const b = await register('pin-b', { labels: ['x-pin'] });
    const { runId } = await submit(`
name: pinned
scope: run
max_parallel_steps: 2
placement: { labels: [x-pin] }
steps:
  root: { run: "true" }
  b1: { run: "true", needs: [root] }
  b2: { run: "true", needs: [root] }
  b3: { run: "true", needs: [root] }
`);
    const first = await offers(a);
    expect(first.map((o) => o.step)).toEqual(['root']);
    expect((await db.current.pool.query('SELECT runner_id FROM run_pins WHERE run_id = $1', [runId])).rows).toEqual([{ runner_id: a.runnerId }]);
    await complete(a, first);
    // The three branches are ready; the other runner never gets any of them.
    expect(await empty(b)).toBe(true);
    const two = await offers(a);
    expect(two).toHaveLength(2);
    const v = await verdicts();
    expect([...v.values()].find((x) => x.code !== 'leased')).toMatchObject({ code: 'pinned_runner_busy', reason: 'pinned runner pin-a busy: run at max_parallel_steps (2/2)' });
    // While it executes the pinned run, A takes no other run's work either; B does.
    const other = await submit('name: other\nsteps:\n  s: { run: "true", placement: { labels: [x-pin] } }\n');
    expect(await empty(a)).toBe(true);
    expect((await offers(b)).map((o) => o.run_id)).toEqual([other.runId]);
    await complete(a, two.slice(0, 1));
    const last = await offers(a);
    expect(last).toHaveLength(1);
    expect(new Set([...first, ...two, ...last].map((o) => o.step))).toEqual(new Set(['root', 'b1', 'b2', 'b3']));
    await complete(a, [...two.slice(1), ...last]);
  });

  it('a path binding places the steps of acme/prod/* on the bound group', async () => {
    await placementBind(db.current.pool, { path: 'acme/prod', requirement: { group: 'prod-bound' } });
    const other = await register('bind-other');
    const bound = await register('bind-prod', { group: 'prod-bound' });
    const { runId } = await submit('name: web\nproject: acme\ntarget: acme/prod/web\nsteps:\n  deploy: { run: "true" }\n');
    const { rows } = await db.current.pool.query('SELECT requirement FROM queue_ready WHERE run_id = $1', [runId]);
    expect(rows).toEqual([{ requirement: { group: 'prod-bound' } }]);
    expect(await empty(other)).toBe(true);
    expect((await offers(bound)).map((o) => o.run_id)).toEqual([runId]);
  });

  it('a full pool holds a step back until its holder completes', async () => {
    await poolLimitSet(db.current.pool, { name: 'db', limit: 1 });
    const r = await register('pool-r', { labels: ['x-pool'] });
    await submit('name: p\nplacement: { labels: [x-pool] }\nsteps:\n  m1: { run: "true", pools: [db] }\n  m2: { run: "true", pools: [db] }\n');
    const first = await offers(r);
    expect(first).toHaveLength(1);
    expect([...(await verdicts()).values()].find((x) => x.code !== 'leased')).toMatchObject({ code: 'pool_full', reason: 'pool full: db (1/1)' });
    expect(await empty(r)).toBe(true);
    await complete(r, first);
    const second = await offers(r);
    expect(second).toHaveLength(1);
    expect(second[0].step).not.toBe(first[0].step);
    await complete(r, second);
    expect((await db.current.pool.query('SELECT count(*)::int AS n FROM pool_holds')).rows[0].n).toBe(0);
  });

  it('pool holds never exceed the limit while two replicas dispatch at once', async () => {
    const second = await startTestServer(db.current.url, { plan: serverPlan(), config: { pollWindowMs: 10_000 } });
    try {
      await poolLimitSet(db.current.pool, { name: 'shared', limit: 2 });
      const steps = Array.from({ length: 8 }, (_, i) => `  s${i}: { run: "true", pools: [shared] }`).join('\n');
      await submit(`name: pp\nplacement: { labels: [x-pp] }\nsteps:\n${steps}\n`);
      const one = await register('pp-1', { labels: ['x-pp'], max_load: 16 });
      const two = await new TestRunner(second.url).register(reg, { name: 'pp-2', labels: ['x-pp'], max_load: 16 });
      const held = async () => (await db.current.pool.query(`SELECT count(*)::int AS n FROM pool_holds WHERE pool = 'shared'`)).rows[0].n as number;
      let done = 0;
      let maxOut = 0;
      for (let round = 0; round < 20 && done < 8; round++) {
        const [a, b] = await Promise.all([one, two].map((r) => r.acquire({ max_offers: 8, wait_ms: 1_000 })));
        const got = [a, b].map((res) => (res.status === 200 ? (res.body.offers as OfferBody[]) : []));
        maxOut = Math.max(maxOut, got[0].length + got[1].length, await held());
        expect(await held()).toBeLessThanOrEqual(2);
        await complete(one, got[0]);
        await complete(two, got[1]);
        done += got[0].length + got[1].length;
      }
      expect(done).toBe(8);
      expect(maxOut).toBe(2);
      expect(await held()).toBe(0);
    } finally {
      await second.stop();
    }
  });

  it('a step larger than every max_load goes to the idle most capable runner only', async () => {
    const small = await register('cap-small', { labels: ['x-cap'], max_load: 1 });
    const big = await register('cap-big', { labels: ['x-cap'], max_load: 2 });
    await submit('name: c\nplacement: { labels: [x-cap] }\nsteps:\n  huge: { run: "true", load: 8 }\n');
    expect(await empty(small)).toBe(true);
    const got = await offers(big);
    expect(got.map((o) => o.step)).toEqual(['huge']);
    await complete(big, got);
  });
});
