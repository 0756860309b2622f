import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import { coordinationRelease, Coordinator, DEFAULT_TIMING, type CoordinationDeps, type CoordinationTimes } from '../../src/coordination/coordinator.js';
import { nextEvent } from '../../src/events.js';
import type { LeaderDuty } from '../../src/coordination/duties.js';
import { CoordinationState } from '../../src/coordination/state.js';
import { SHARD_COUNT } from '../../src/core/entry.js';
import { shardAssignment, shardsOf } from '../../src/core/rendezvous.js';
import { createLogger } from '../../src/logger.js';
import { coordinationLeaseList, LEADER_LEASE } from '../../src/store/coordination.js';
import { replicaRegister, replicaSetQuiesced, replicaStop } from '../../src/store/replicas.js';
import { useTestDatabase } from '../support/db.js';

/** One fake clock for every in-process replica; `age` moves it and the time the ticks hand the store together. */
function fakeClock(): Clock & { t: number } {
  const c = { t: 1_000_000, now: () => c.t, sleep: async () => {} };
  return c;
}

interface Replica {
  id: string;
  deps: CoordinationDeps;
  state: CoordinationState;
  events: EventEmitter;
  requeued: Array<{ stepId: number; fromAttempt: number; toAttempt: number; reason: string }>;
  tick(at?: CoordinationTimes): ReturnType<Coordinator['once']>;
}

describe('the coordination loop, tick by tick, across in-process replicas', () => {
  const db = useTestDatabase();
  const log = createLogger('silent', { pretty: false });
  let clock: ReturnType<typeof fakeClock>;
  let replicas: Replica[];
  /** The database's time as every tick sees it: the store's clock at the start, then moved by `age`. */
  let storeTime: number;

  beforeEach(async () => {
    clock = fakeClock();
    replicas = [];
    await db.current.pool.query(
      `TRUNCATE replicas, coordination_leases, step_leases, queue_ready, runners, completed_attempts, pool_holds`,
    );
    storeTime = ((await db.current.pool.query(`SELECT now() AS t`)).rows[0].t as Date).getTime();
  });
  afterEach(() => {
    for (const r of replicas) r.events.removeAllListeners();
  });

  async function replica(id: string, site?: string, leaderDuties?: LeaderDuty[]): Promise<Replica> {
    await replicaRegister(db.current.pool, { id, host: 'test', site, version: 'test' });
    const events = new EventEmitter();
    const state = new CoordinationState(clock);
    const requeued: Replica['requeued'] = [];
    const deps: CoordinationDeps = {
      pool: db.current.pool,
      replicaId: id,
      site: site ?? null,
      clock,
      log,
      events,
      state,
      timing: DEFAULT_TIMING,
      config: { pollWindowMs: 50_000, replicaRetentionMs: 86_400_000, completedAttemptsRetentionDays: 7 },
      hooks: { stepRequeued: async (_c, p) => void requeued.push(p) },
      leaderDuties,
    };
    const coordinator = new Coordinator(deps);
    const r: Replica = { id, deps, state, events, requeued, tick: (at) => coordinator.once({ at: { ...everyDuty(storeAt()), ...at } }) };
    replicas.push(r);
    return r;
  }

  /** The store's time as the ticks see it, `ms` on: a time to hand one duty under test. */
  const storeAt = (ms = 0) => new Date(storeTime + ms);
  const everyDuty = (t: Date): CoordinationTimes => ({ heartbeat: t, membership: t, leases: t, reclaim: t, liveness: t, reaping: t, retention: t });

  /** Time passes for everyone: the fake clock and the time every tick hands the store move together; no row is rewritten. */
  function age(ms: number): void {
    clock.t += ms;
    storeTime += ms;
  }

  async function storeOwners(): Promise<Map<number, string>> {
    const leases = await coordinationLeaseList(db.current.pool, { now: storeAt() });
    return new Map(leases.filter((l) => l.name.startsWith('shard:')).map((l) => [Number(l.name.slice(6)), l.holder]));
  }

  /** The invariant: no shard is trusted by two replicas at once, and each trusted shard is backed by its lease. */
  async function assertNoOverlap(alive: Replica[]): Promise<void> {
    const seen = new Map<number, string>();
    const store = await storeOwners();
    for (const r of alive) {
      for (const s of r.state.owned()) {
        expect(seen.get(s), `shard ${s} owned by ${seen.get(s)} and ${r.id}`).toBeUndefined();
        seen.set(s, r.id);
        expect(store.get(s)).toBe(r.id);
      }
    }
    const leaders = alive.filter((r) => r.state.isLeader());
    expect(leaders.length).toBeLessThanOrEqual(1);
  }

  async function settle(alive: Replica[], rounds = 3): Promise<void> {
    for (let i = 0; i < rounds; i++) {
      for (const r of alive) {
        await r.tick();
        await assertNoOverlap(alive);
      }
    }
  }

  it('a lone replica owns every shard and leads after one tick', async () => {
    const a = await replica('a-000001');
    const gained = nextEvent(a.events, 'leader:gained');
    const changed = nextEvent(a.events, 'shards:changed');
    const report = await a.tick();
    expect(report.owned).toHaveLength(SHARD_COUNT);
    expect((await changed).added).toHaveLength(SHARD_COUNT);
    expect((await gained).token).toBeGreaterThan(0);
    expect(a.state.isLeader()).toBe(true);
    const leases = await coordinationLeaseList(db.current.pool, { now: storeAt() });
    expect(leases.filter((l) => l.holder === a.id)).toHaveLength(SHARD_COUNT + 1);
  });

  it('a renewal keeps the fencing token; a change of hands issues a larger one', async () => {
    const a = await replica('a-000001');
    await a.tick();
    const first = a.state.leaderToken()!;
    await a.tick();
    expect(a.state.leaderToken()).toBe(first);
    const b = await replica('b-000002');
    age(16_000); // a goes silent; its leases lapse
    await b.tick();
    expect(b.state.isLeader()).toBe(true);
    expect(b.state.leaderToken()!).toBeGreaterThan(first);
  });

  it('three replicas converge on the rendezvous assignment with every shard owned exactly once', async () => {
    const all = [await replica('web-0a0a0a'), await replica('web-1b1b1b'), await replica('web-2c2c2c')];
    await settle(all);
    const expected = shardAssignment(all.map((r) => r.id));
    const store = await storeOwners();
    expect(store.size).toBe(SHARD_COUNT);
    for (let s = 0; s < SHARD_COUNT; s++) expect(store.get(s)).toBe(expected[s]);
    for (const r of all) expect(r.state.owned()).toEqual(shardsOf(r.id, all.map((x) => x.id)));
    expect(all.filter((r) => r.state.isLeader())).toHaveLength(1);
  });

  it('a joining replica takes only its own shards, and only after their holder let go', async () => {
    const old = [await replica('web-0a0a0a'), await replica('web-1b1b1b')];
    await settle(old);
    const beforeOwners = await storeOwners();
    const newcomer = await replica('web-9f9f9f');
    const first = await newcomer.tick();
    // Its shards are still held by the others: nothing taken yet, nothing overlapping.
    expect(first.desired.length).toBeGreaterThan(0);
    expect(first.owned).toEqual([]);
    await settle([...old, newcomer]);
    const after = await storeOwners();
    for (let s = 0; s < SHARD_COUNT; s++) {
      if (after.get(s) !== beforeOwners.get(s)) expect(after.get(s)).toBe(newcomer.id);
    }
    expect(newcomer.state.owned()).toEqual(first.desired);
  });

  it('a dead replica\'s shards move to the survivors, and only its shards', async () => {
    const all = [await replica('web-0a0a0a'), await replica('web-1b1b1b'), await replica('web-2c2c2c')];
    await settle(all);
    const before = await storeOwners();
    const [dead, ...alive] = all;
    age(16_000); // dead stops ticking: its heartbeat and leases age past the window
    await settle(alive, 2);
    const after = await storeOwners();
    expect(after.size).toBe(SHARD_COUNT);
    for (let s = 0; s < SHARD_COUNT; s++) {
      if (before.get(s) === dead.id) expect(after.get(s)).not.toBe(dead.id);
      else expect(after.get(s)).toBe(before.get(s));
    }
    // The dead replica's own view lapsed by its local deadline: it would dispatch nothing even if it woke.
    expect(dead.state.owned()).toEqual([]);
    expect(dead.state.isLeader()).toBe(false);
  });

  it('a live lease is never taken early, even by a replica that believes the holder dead', async () => {
    const a = await replica('web-0a0a0a');
    const b = await replica('web-1b1b1b');
    await settle([a, b]);
    // Seen 20 s on, b's heartbeat is stale (a's own is written at that time), but a's view of b is
    // wrong only about membership: the leases are judged by the database clock, and b's are still valid.
    const later = storeAt(20_000);
    const report = await a.tick({ heartbeat: later, membership: later });
    expect(report.live.map((m) => m.id)).toEqual([a.id]);
    expect(report.desired).toHaveLength(SHARD_COUNT);
    expect(report.owned).toEqual(shardsOf(a.id, [a.id, b.id]));
    await assertNoOverlap([a, b]);
  });

  it('clean stop hands the leader lease over on the next tick of a peer', async () => {
    const a = await replica('web-0a0a0a');
    const b = await replica('web-1b1b1b');
    await a.tick();
    await settle([a, b]);
    expect(a.state.isLeader()).toBe(true);
    const lost = nextEvent(a.events, 'leader:lost');
    await coordinationRelease(a.deps);
    await replicaStop(db.current.pool, a.id);
    await lost;
    const gained = nextEvent(b.events, 'leader:gained');
    await b.tick();
    expect((await gained).replicaId).toBe(b.id);
    expect(b.state.owned()).toHaveLength(SHARD_COUNT);
  });

  it('a killed leader is replaced once its lease lapses (within three ticks)', async () => {
    const a = await replica('web-0a0a0a');
    const b = await replica('web-1b1b1b');
    await a.tick();
    await settle([a, b]);
    let waited = 0;
    while (!b.state.isLeader()) {
      age(DEFAULT_TIMING.tickMs);
      waited += DEFAULT_TIMING.tickMs;
      await b.tick();
      expect(waited).toBeLessThanOrEqual(4 * DEFAULT_TIMING.tickMs);
    }
    expect(waited).toBeGreaterThanOrEqual(DEFAULT_TIMING.leaderTtlMs);
  });

  it('quiesce takes a replica out of the membership (shards, leadership, site) while it keeps ticking; resume brings it back', async () => {
    const a = await replica('web-0a0a0a', 'dc1');
    const b = await replica('web-1b1b1b', 'dc2');
    await a.tick();
    await settle([a, b]);
    expect(b.state.liveSites()).toEqual(new Set(['dc1', 'dc2']));
    const res = await replicaSetQuiesced(db.current.pool, { id: a.id, quiesced: true });
    expect(res?.changed).toBe(true);
    expect((await replicaSetQuiesced(db.current.pool, { id: a.id, quiesced: true }))?.changed).toBe(false);
    const out = nextEvent(a.events, 'membership:changed');
    await a.tick();
    expect(await out).toMatchObject({ member: false });
    expect(a.state.owned()).toEqual([]);
    expect(a.state.isLeader()).toBe(false);
    expect(a.state.inMembership()).toBe(false);
    await b.tick();
    expect(b.state.owned()).toHaveLength(SHARD_COUNT);
    expect(b.state.isLeader()).toBe(true);
    expect(b.state.liveSites()).toEqual(new Set(['dc2']));
    await replicaSetQuiesced(db.current.pool, { id: a.id, quiesced: false });
    await settle([a, b]);
    expect(a.state.inMembership()).toBe(true);
    expect(a.state.owned()).toEqual(shardsOf(a.id, [a.id, b.id]));
  });

  it('reclaims a dead peer\'s claims: unexposed at their attempt and position, exposed as a new attempt, acked left alone', async () => {
    const a = await replica('web-0a0a0a');
    const dead = await replica('web-dead00');
    await settle([a, dead]);
    const pool = db.current.pool;
    const insert = (stepId: number, attempt: number, position: number, extra: string) =>
      pool.query(
        `INSERT INTO step_leases (step_id, run_id, shard, attempt, ready_at, enqueued_at, position, holder, expires_at,
                                           delivered_at, runner_id, acked_at, executing)
         VALUES ($1, 7, 3, $2, now() - interval '1 minute', now() - interval '1 minute', $3, $4, now() + interval '3 minutes', ${extra})`,
        [stepId, attempt, position, dead.id],
      );
    await insert(101, 1, 11, `NULL, NULL, NULL, false`);
    await insert(102, 2, 12, `now(), 'r1', NULL, false`);
    await insert(103, 1, 13, `now(), 'r1', now(), true`);
    await pool.query(`INSERT INTO pool_holds (pool, step_id, attempt) VALUES ('db', 102, 2)`);
    // One held by a live replica is not touched either.
    await pool.query(
      `INSERT INTO step_leases (step_id, run_id, shard, attempt, ready_at, enqueued_at, position, holder, expires_at)
       VALUES (104, 7, 3, 1, now(), now(), 14, $1, now() + interval '3 minutes')`,
      [a.id],
    );

    const first = await a.tick();
    expect(first.reclaimed).toEqual([]); // still within the staleness window
    age(16_000);
    const kicked = nextEvent(a.events, 'queue:enqueued');
    const report = await a.tick();
    expect(report.reclaimed.map((r) => [r.stepId, r.exposed, r.requeuedAttempt])).toEqual([
      [101, false, 1],
      [102, true, 3],
    ]);
    expect((await kicked).stepIds).toEqual([101, 102]);
    const { rows: ready } = await pool.query(`SELECT step_id, attempt, position FROM queue_ready ORDER BY step_id`);
    expect(ready).toEqual([
      { step_id: 101, attempt: 1, position: 11 },
      { step_id: 102, attempt: 3, position: 12 },
    ]);
    const { rows: leases } = await pool.query(`SELECT step_id FROM step_leases ORDER BY step_id`);
    expect(leases.map((r) => r.step_id)).toEqual([103, 104]);
    expect((await pool.query(`SELECT * FROM pool_holds`)).rowCount).toBe(0);
    // The hook is handed the lease as it was taken back: its spans show its times.
    expect(a.requeued).toEqual([
      {
        stepId: 102,
        fromAttempt: 2,
        toAttempt: 3,
        reason: 'replica web-dead00 lost before the runner acked',
        lease: expect.objectContaining({ stepId: 102, attempt: 2, holder: dead.id, runnerId: 'r1', ackedAt: null, deliveredAt: expect.any(Date), readyAt: expect.any(Date) }),
      },
    ]);
  });

  it('two replicas reclaiming at once requeue each claim exactly once', async () => {
    const a = await replica('web-0a0a0a');
    const b = await replica('web-1b1b1b');
    await settle([a, b]);
    const pool = db.current.pool;
    await pool.query(
      `INSERT INTO step_leases (step_id, run_id, shard, attempt, ready_at, enqueued_at, position, holder, expires_at)
       SELECT g, g, g % 64, 1, now(), now(), g, 'gone-000000', now() + interval '3 minutes' FROM generate_series(1, 1200) g`,
    );
    const [ra, rb] = await Promise.all([a.tick(), b.tick()]);
    const ids = [...ra.reclaimed, ...rb.reclaimed].map((r) => r.stepId);
    expect(ids).toHaveLength(1200);
    expect(new Set(ids).size).toBe(1200);
    expect((await pool.query(`SELECT count(*)::int AS n FROM queue_ready WHERE attempt = 1`)).rows[0].n).toBe(1200);
  });

  it('the leader marks silent runners watch after one poll window and offline after two', async () => {
    const a = await replica('web-0a0a0a');
    const pool = db.current.pool;
    const t0 = storeAt();
    const at = (ms: number) => new Date(t0.getTime() + ms);
    for (const id of ['r-fresh', 'r-one', 'r-two']) {
      await pool.query(`INSERT INTO runners (id, name, credential_hash, last_seen_at) VALUES ($1, $1, $1, $2)`, [id, t0]);
    }
    expect((await a.tick()).liveness).toEqual([]);
    // 70 s on, only r-fresh has polled (at that time): the others missed one window (50 s + grace).
    const seen = (ids: string[], t: Date) => pool.query(`UPDATE runners SET last_seen_at = $2 WHERE id = ANY($1::text[])`, [ids, t]);
    await seen(['r-fresh'], at(70_000));
    const r1 = await a.tick({ liveness: at(70_000) });
    expect(r1.liveness.map((c) => [c.runnerId, c.to]).sort()).toEqual([['r-one', 'watch'], ['r-two', 'watch']]);
    await seen(['r-fresh', 'r-one'], at(120_000));
    const r2 = await a.tick({ liveness: at(120_000) });
    expect(r2.liveness.map((c) => [c.runnerId, c.to]).sort()).toEqual([['r-one', 'online'], ['r-two', 'offline']]);
    const { rows } = await pool.query(`SELECT id, state FROM runners ORDER BY id`);
    expect(rows).toEqual([
      { id: 'r-fresh', state: 'online' },
      { id: 'r-one', state: 'online' },
      { id: 'r-two', state: 'offline' },
    ]);
  });

  it('a replica whose row vanished (reaped while it was frozen) registers again and rejoins', async () => {
    const a = await replica('web-0a0a0a', 'dc1');
    await a.tick();
    await db.current.pool.query(`DELETE FROM replicas WHERE id = $1`, [a.id]);
    const report = await a.tick();
    expect(report.member).toBe(true);
    expect(report.owned).toHaveLength(SHARD_COUNT);
    const { rows } = await db.current.pool.query(`SELECT site, stopped_at FROM replicas WHERE id = $1`, [a.id]);
    expect(rows).toEqual([{ site: 'dc1', stopped_at: null }]);
  });

  it('the leader reaps replica rows past the retention unless they still hold a live lease, and prunes completed_attempts', async () => {
    const a = await replica('web-0a0a0a');
    const pool = db.current.pool;
    const t0 = storeAt();
    await replicaRegister(pool, { id: 'old-000001', host: 'x', version: 'x' });
    await replicaRegister(pool, { id: 'old-000002', host: 'x', version: 'x' });
    // The leader's tick eight days on: the old replicas last beat now, a beats then. old-000002
    // still holds a lease valid past that time; one attempt completed now, the other two days on.
    const later = new Date(t0.getTime() + 8 * 86_400_000);
    await pool.query(`INSERT INTO coordination_leases (name, holder, token, expires_at) VALUES ('shard:5', 'old-000002', 1, $1::timestamptz + interval '10 seconds')`, [later]);
    await pool.query(`INSERT INTO completed_attempts (step_id, attempt, done_at) VALUES (1, 1, $1), (2, 1, $1::timestamptz + interval '2 days')`, [t0]);
    const report = await a.tick({ heartbeat: later, membership: later, reaping: later, retention: later });
    expect(report.leader).toBe(true);
    expect(report.reaped).toEqual(['old-000001']);
    expect(report.pruned).toBe(1);
    const { rows } = await pool.query(`SELECT id FROM replicas ORDER BY id`);
    expect(rows.map((r) => r.id)).toEqual(['old-000002', a.id]);
  });

  it('leader duties run through one mechanism: on the leader only, in order, each on its cadence; a failing one is skipped and retried', async () => {
    const ran: string[] = [];
    let failures = 1;
    const duties = (who: string): LeaderDuty[] => [
      // Every tick, against the store: the database's clock as the leader sees it.
      { name: 'every tick', fallback: undefined, run: async ({ leaderToken }) => ran.push(`${who}:tick:${leaderToken > 0}:${(await db.current.pool.query('SELECT 1 AS one')).rows[0].one}`) },
      {
        name: 'flaky',
        fallback: undefined,
        run: async () => {
          ran.push(`${who}:flaky`);
          if (failures-- > 0) throw new Error('store hiccup');
        },
      },
      // Once a minute, the first one a minute after leadership was gained; a failure waits 10 s.
      { name: 'cadenced', everyMs: 60_000, retryMs: 10_000, fallback: undefined, run: async () => void ran.push(`${who}:cadenced`) },
    ];
    const a = await replica('a-000001', undefined, duties('a'));
    const b = await replica('b-000002', undefined, duties('b'));
    const first = await a.tick();
    await b.tick();
    expect(first.leader).toBe(true);
    // The leader ran its per-tick duties in order, the failing one did not stop the tick, and the
    // coordination duties still reported; the other replica ran none.
    expect(ran).toEqual(['a:tick:true:1', 'a:flaky']);
    expect(first.liveness).toEqual([]);
    ran.length = 0;
    clock.t += 30_000;
    await a.tick();
    expect(ran).toEqual(['a:tick:true:1', 'a:flaky']);
    ran.length = 0;
    clock.t += 30_000;
    await a.tick();
    expect(ran).toEqual(['a:tick:true:1', 'a:flaky', 'a:cadenced']);
    ran.length = 0;
    await a.tick();
    expect(ran).toEqual(['a:tick:true:1', 'a:flaky']);

    // The leader goes silent: the next leader's cadence starts at its own gain, and the old one,
    // back but not leading, runs nothing.
    ran.length = 0;
    age(16_000);
    expect((await b.tick()).leader).toBe(true);
    expect((await a.tick()).leader).toBe(false);
    expect(ran).toEqual(['b:tick:true:1', 'b:flaky']);
    ran.length = 0;
    clock.t += 59_000;
    await b.tick();
    expect(ran).not.toContain('b:cadenced');
    clock.t += 1_000;
    await b.tick();
    expect(ran.filter((r) => r === 'b:cadenced')).toHaveLength(1);
  });

  it('a cadenced leader duty that fails is tried again after its retry wait, not after a whole interval', async () => {
    let calls = 0;
    const a = await replica('a-000001', undefined, [
      {
        name: 'housekeeping-like',
        everyMs: 60_000,
        retryMs: 10_000,
        fallback: undefined,
        run: async () => {
          calls++;
          if (calls === 1) throw new Error('store hiccup');
          await db.current.pool.query('SELECT now()');
        },
      },
    ]);
    await a.tick();
    clock.t += 60_000;
    await a.tick();
    expect(calls).toBe(1);
    clock.t += 9_000;
    await a.tick();
    expect(calls).toBe(1);
    clock.t += 1_000;
    await a.tick();
    expect(calls).toBe(2);
    clock.t += 59_000;
    await a.tick();
    expect(calls).toBe(2);
  });

  it('membership churn: at every sampled instant each shard has at most one owner, and the survivors converge', async () => {
    // A seeded walk: replicas join, die, stop cleanly, get quiesced; every single tick is a sample.
    let seed = 20261130;
    const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    let alive: Replica[] = [await replica('web-000000')];
    let n = 1;
    for (let step = 0; step < 60; step++) {
      const roll = rand();
      if (roll < 0.15 && alive.length < 6) {
        alive.push(await replica(`web-${(n++).toString(16).padStart(6, '0')}`));
      } else if (roll < 0.22 && alive.length > 1) {
        const victim = alive[Math.floor(rand() * alive.length)];
        alive = alive.filter((r) => r !== victim);
        age(DEFAULT_TIMING.stalenessMs + 1_000); // killed: everyone else's world moves on
      } else if (roll < 0.28 && alive.length > 1) {
        const victim = alive[Math.floor(rand() * alive.length)];
        alive = alive.filter((r) => r !== victim);
        await coordinationRelease(victim.deps);
        await replicaStop(db.current.pool, victim.id);
      } else if (roll < 0.32 && alive.length > 1) {
        const r = alive[Math.floor(rand() * alive.length)];
        await replicaSetQuiesced(db.current.pool, { id: r.id, quiesced: true });
        await r.tick();
        await replicaSetQuiesced(db.current.pool, { id: r.id, quiesced: false });
      } else {
        age(1_000);
      }
      for (const r of [...alive].sort(() => rand() - 0.5)) {
        await r.tick();
        await assertNoOverlap(alive);
      }
    }
    await settle(alive, 3);
    const owners = await storeOwners();
    const expected = shardAssignment(alive.map((r) => r.id));
    for (let s = 0; s < SHARD_COUNT; s++) expect(owners.get(s)).toBe(expected[s]);
    expect(alive.filter((r) => r.state.isLeader())).toHaveLength(1);
    expect((await coordinationLeaseList(db.current.pool, { now: storeAt() })).some((l) => l.name === LEADER_LEASE)).toBe(true);
  });
});
