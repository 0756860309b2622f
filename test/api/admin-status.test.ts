import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { nextEvent } from '../../src/events.js';
import { replicaQuiesceSet } from '../../src/ops/domain/levers.js';
import type { AdminStatus } from '../../src/ops/domain/status.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate, tokenRevoke } from '../../src/store/tokens.js';
import { truncateLive, useTestDatabase, waitFor } from '../support/db.js';
import { startTestServer } from '../support/server.js';

// A short tick so in-process replicas converge in well under a second; the logic is the production one.
const FAST = { tickMs: 100 };
/**
 * A tick (and leases and staleness to match) far longer than any wait in these tests: whatever
 * moves a lease here was announced, since no tick comes, so the tests wait on the event and
 * need no bound on how long it took.
 */
const NO_TICK = { tickMs: 3_600_000, stalenessMs: 3 * 3_600_000, shardTtlMs: 3 * 3_600_000, leaderTtlMs: 3 * 3_600_000 };

describe('GET /api/admin/status and the replica levers', () => {
  const db = useTestDatabase();
  let servers: ServerHandle[] = [];
  let admin: string;
  let revoked: string;
  beforeAll(async () => {
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ops' })).secret;
    const r = await tokenCreate(db.current.pool, { kind: 'admin', name: 'old' });
    await tokenRevoke(db.current.pool, r.token.id);
    revoked = r.secret;
  });
  afterEach(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    servers = [];
    await truncateLive(db.current.pool, 'replicas, coordination_leases');
  });

  const start = async (site?: string) => {
    const s = await startTestServer(db.current.url, { config: { site }, plan: { coordination: { timing: FAST }, ops: true } });
    servers.push(s);
    return s;
  };
  const get = async (s: ServerHandle, auth?: string) => {
    const res = await fetch(`${s.url}/api/admin/status`, { headers: auth ? { authorization: auth } : {} });
    return { status: res.status, body: (await res.json()) as any };
  };
  const post = async (s: ServerHandle, path: string) => {
    const res = await fetch(`${s.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${admin}` } });
    return { status: res.status, body: (await res.json()) as any };
  };
  const converged = async (s: ServerHandle, n: number): Promise<AdminStatus> =>
    (await waitFor(
      async () => {
        const { body } = await get(s, `Bearer ${admin}`);
        const st = body as AdminStatus;
        const live = st.replicas.filter((r) => r.state === 'live');
        return live.length === n && st.shards.owned === 64 && live.every((r) => r.shards.length > 0) && st.leader ? st : undefined;
      },
      { what: `${n} live replicas sharing the shards` },
    ))!;

  it('is closed without a live admin token', async () => {
    const s = await start();
    expect((await get(s)).status).toBe(401);
    expect((await get(s, 'Bearer ocadm_notarealtoken')).status).toBe(401);
    expect((await get(s, `Bearer ${revoked}`)).status).toBe(401);
    expect((await get(s, `Basic ${admin}`)).status).toBe(401);
    const reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'r' })).secret;
    expect((await get(s, `Bearer ${reg}`)).status).toBe(401);
    expect((await post(s, '/api/admin/replicas/x/quiesce')).status).toBe(404);
    const anon = await fetch(`${s.url}/api/admin/replicas/${s.replica.replicaId}/quiesce`, { method: 'POST' });
    expect(anon.status).toBe(401);
  });

  it('shows every replica with site, state, shards, the leader and the postures', async () => {
    const a = await start('dc1');
    const b = await start('dc2');
    const st = await converged(a, 2);
    expect(st.replicas.map((r) => r.site).sort()).toEqual(['dc1', 'dc2']);
    expect(st.replicas.flatMap((r) => r.shards).sort((x, y) => x - y)).toEqual(Array.from({ length: 64 }, (_, i) => i));
    expect(st.replicas.filter((r) => r.leader)).toHaveLength(1);
    expect([a.replica.replicaId, b.replica.replicaId]).toContain(st.leader!.replicaId);
    expect(st.postures).toMatchObject({ quiesced: false, halted: false });
    // Live: its heartbeat younger than the staleness window, by the store's clock.
    for (const r of st.replicas) expect(r.state).toBe('live');
  });

  it('quiesce moves a replica\'s shards and leadership away and sets its state; resume brings it back; both idempotent and audited', async () => {
    const a = await start('dc1');
    const b = await start('dc2');
    await converged(a, 2);
    const left = nextEvent(b.replica.events, 'membership:changed', (p) => !p.member);
    const q1 = await post(a, `/api/admin/replicas/${b.replica.replicaId}/quiesce`);
    expect(q1).toMatchObject({ status: 200, body: { id: b.replica.replicaId, quiesced: true, changed: true } });
    expect((await post(a, `/api/admin/replicas/${b.replica.replicaId}/quiesce`)).body.changed).toBe(false);
    await left;
    expect(b.replica.ownership.inMembership()).toBe(false);
    const st = (await waitFor(async () => {
      const { body } = await get(b, `Bearer ${admin}`); // a quiesced replica keeps serving HTTP
      const s = body as AdminStatus;
      const mine = s.replicas.find((r) => r.id === a.replica.replicaId)!;
      return mine.shards.length === 64 && mine.leader ? s : undefined;
    }))!;
    expect(st.replicas.find((r) => r.id === b.replica.replicaId)).toMatchObject({ state: 'quiesced', shards: [], leader: false });
    expect(a.replica.ownership.liveSites()).toEqual(new Set(['dc1']));
    expect(b.replica.ownership.owned()).toEqual([]);

    expect((await post(a, `/api/admin/replicas/${b.replica.replicaId}/resume`)).body).toMatchObject({ quiesced: false, changed: true });
    await converged(a, 2);
    const { rows } = await db.current.pool.query(`SELECT action, target, detail FROM audit_log WHERE target = $1 ORDER BY id`, [b.replica.replicaId]);
    expect(rows.map((r) => [r.action, r.detail.changed])).toEqual([
      ['replica.quiesce', true],
      ['replica.quiesce', false],
      ['replica.resume', true],
    ]);
  });

  it('hand-overs are announced: with no tick to come, a join, a quiesce, a resume and a clean stop move the leases', async () => {
    const slow = () => startTestServer(db.current.url, { plan: { coordination: { timing: NO_TICK }, ops: true } });
    const a = await slow();
    servers.push(a);
    const b = await slow();
    servers.push(b);
    // b wants its shards from a: its announcement wakes a, whose release wakes b.
    await waitFor(() => a.replica.ownership.owned().length > 0 && b.replica.ownership.owned().length > 0 && a.replica.ownership.owned().length + b.replica.ownership.owned().length === 64, {
      what: 'the shards split',
    });

    await replicaQuiesceSet(db.current.pool, { id: b.replica.replicaId, quiesced: true, actor: 'test' });
    await waitFor(() => a.replica.ownership.owned().length === 64, { what: 'a owning every shard' });
    await replicaQuiesceSet(db.current.pool, { id: b.replica.replicaId, quiesced: false, actor: 'test' });
    await waitFor(() => b.replica.ownership.owned().length > 0 && a.replica.ownership.owned().length + b.replica.ownership.owned().length === 64, { what: 'the shards split again' });

    const [leader, other] = a.replica.ownership.isLeader() ? [a, b] : [b, a];
    const gained = nextEvent(other.replica.events, 'leader:gained');
    await leader.stop();
    servers = servers.filter((s) => s !== leader);
    await gained;
    // The pass that takes the leader lease may still count the stopping replica live and take
    // only its own half of the shards; the rest follow on the next pass, woken the same way.
    await waitFor(() => other.replica.ownership.owned().length === 64, { what: 'the survivor owning every shard' });
  });

  it('a clean stop hands the leader lease to a peer by its release, not its expiry, and marks the replica stopped', async () => {
    const slow = async () => {
      const s = await startTestServer(db.current.url, { plan: { coordination: { timing: NO_TICK }, ops: true } });
      servers.push(s);
      return s;
    };
    const a = await slow();
    const b = await slow();
    const st = await converged(a, 2);
    const [leader, other] = st.leader!.replicaId === a.replica.replicaId ? [a, b] : [b, a];
    const gained = nextEvent(other.replica.events, 'leader:gained');
    await leader.stop();
    servers = servers.filter((s) => s !== leader);
    // The lease would last hours and no tick comes: only the release can hand it over.
    await gained;
    const after = (await get(other, `Bearer ${admin}`)).body as AdminStatus;
    expect(after.replicas.find((r) => r.id === leader.replica.replicaId)?.state).toBe('stopped');
  });
});
