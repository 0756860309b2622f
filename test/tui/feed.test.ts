import { afterEach, describe, expect, it } from 'vitest';
import { opsConsoleSource } from '../../src/cli/console-source.js';
import { storeOps } from '../../src/ops/transport/store.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { coordinationLeaseAcquire, shardLeaseName } from '../../src/store/coordination.js';
import { QUEUE_CHANNEL } from '../../src/store/queue.js';
import { ConsoleFeed } from '../../src/tui/feed.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { seedRun } from '../support/seed.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { withHostPort } from '../support/urls.js';

describe('the console feed', () => {
  const db = useTestDatabase();
  let proxy: TcpProxy | undefined;
  let pool: Pool | undefined;
  afterEach(async () => {
    await pool?.end().catch(() => {});
    await proxy?.stop();
    proxy = pool = undefined;
  });

  it('keeps the last snapshot through a store outage, marks it stale with the cause, and recovers by itself', async () => {
    const u = new URL(db.current.url);
    proxy = new TcpProxy(u.hostname, Number(u.port || 5432));
    const url = withHostPort(db.current.url, '127.0.0.1', await proxy.start());
    pool = createPool(url, { max: 2, connectionTimeoutMs: 1_000, queryTimeoutMs: 2_000 });
    const source = opsConsoleSource({ ops: storeOps({ pool, actor: 'test', source: 'test' }), databaseUrl: url, acceptExceeding: true });
    let clock = 1_000_000;
    const feed = new ConsoleFeed({ source, intervalMs: 60_000, limit: 10, now: () => clock });

    await seedRun(db.current.pool, { steps: [{ name: 'a' }, { name: 'b' }] });
    await coordinationLeaseAcquire(db.current.pool, { names: [0, 1].map(shardLeaseName), holder: 'rep-a', ttlMs: 60_000 });
    const first = await feed.refresh();
    expect(first.stale).toBeNull();
    expect(first.view?.lanes[2].ready).toBe(2);
    expect(first.history).toHaveLength(1);

    proxy.refuse();
    clock += 1_000;
    const down = await feed.refresh();
    expect(down.stale).toMatchObject({ since: clock });
    expect(down.stale!.cause).not.toBe('');
    expect(down.view).toBe(first.view);
    clock += 1_000;
    const still = await feed.refresh();
    expect(still.stale?.since).toBe(clock - 1_000);

    proxy.heal();
    await seedRun(db.current.pool, { steps: [{ name: 'c' }] });
    await db.current.pool.query(`DELETE FROM coordination_leases WHERE name = $1`, [shardLeaseName(1)]);
    clock += 1_000;
    const back = await feed.refresh();
    expect(back.stale).toBeNull();
    expect(back.view?.lanes[2].ready).toBe(3);
    expect(back.history.map((h) => h.ready[2])).toEqual([2, 3]);
    // Shard 1 lost its owner since the last good snapshot: it flashes once.
    expect([...back.moved.entries()]).toEqual([[1, 'rep-a']]);
    clock += 1_000;
    expect((await feed.refresh()).moved.size).toBe(0);
  });

  it('LISTENs on the listen URL when one is given: a store URL that cannot keep a LISTEN (a transaction pooler) does not take the wake-ups', async () => {
    const u = new URL(db.current.url);
    proxy = new TcpProxy(u.hostname, Number(u.port || 5432));
    const pooled = withHostPort(db.current.url, '127.0.0.1', await proxy.start());
    // The store URL refuses every session: only the listen URL can deliver a notification.
    proxy.refuse();
    const source = opsConsoleSource({ ops: storeOps({ pool: db.current.pool, actor: 'test', source: 'test' }), databaseUrl: pooled, listenDatabaseUrl: db.current.url, acceptExceeding: true });
    let woken = 0;
    const stop = source.subscribe!(() => woken++);
    try {
      // Notified until the LISTEN session is up and hears one.
      await waitFor(async () => {
        await db.current.pool.query(`SELECT pg_notify($1, '')`, [QUEUE_CHANNEL]);
        return woken > 0 || undefined;
      }, { timeoutMs: 20_000, intervalMs: 100, what: 'a wake-up through the listen URL' });
    } finally {
      await stop();
    }
    expect(woken).toBeGreaterThan(0);
  });
});
