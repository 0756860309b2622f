import { beforeEach, describe, expect, it } from 'vitest';
import { withTransaction } from '../../src/store/pool.js';
import { queueClaim, type ClaimParams } from '../../src/store/queue.js';
import { useTestDatabase } from '../support/db.js';

describe('queueClaim lanes: owned shards, own site, orphaned sites, aged any-shard', () => {
  const db = useTestDatabase();

  /** step id, shard, site stamp, seconds since ready. */
  const rows: Array<[number, number, string | null, number]> = [
    [1, 1, null, 1], // owned shard, fresh
    [2, 2, null, 1], // other shard, fresh
    [3, 2, null, 20], // other shard, aged
    [4, 2, 'dc1', 1], // other shard, own site
    [5, 1, 'dc2', 1], // owned shard, another live site, fresh
    [6, 2, 'dc3', 1], // other shard, a site with no live replica
    [7, 1, 'dc2', 20], // owned shard, another live site, aged
  ];
  beforeEach(async () => {
    await db.current.pool.query(`TRUNCATE queue_ready`);
    for (const [id, shard, stamp, age] of rows) {
      await db.current.pool.query(
        `INSERT INTO queue_ready (step_id, run_id, shard, attempt, site_stamp, ready_at, position)
         VALUES ($1, $1, $2, 1, $3, now() - $4 * interval '1 second', $1)`,
        [id, shard, stamp, age],
      );
    }
  });

  const claim = (p: Partial<ClaimParams>) =>
    withTransaction(db.current.pool, async (c) => (await queueClaim(c, { shards: [1], limit: 64, ...p })).map((e) => e.stepId));

  it('without lanes: only the owned shards, stamps or not', async () => {
    expect(await claim({})).toEqual([1, 5, 7]);
    expect(await claim({ shards: [] })).toEqual([]);
  });

  it('owning only shards, the claim takes what the full claim takes with every other lane empty: in order, paged, locked or not', async () => {
    // Several owned shards, entries in two lanes, a page boundary; an aged lane that nothing has
    // waited long enough for makes the full statement, with the other lanes on but empty.
    for (let id = 8; id < 40; id++) {
      await db.current.pool.query(`INSERT INTO queue_ready (step_id, run_id, shard, attempt, lane, ready_at, position) VALUES ($1, $1, $2, 1, $3, now(), $1)`, [id, id % 4, id % 3]);
    }
    for (const shards of [[1], [0, 1, 3], [2]]) {
      for (const lock of [true, false]) {
        const page = { shards, limit: 5, lock };
        const simple = await claim(page);
        expect(simple).toEqual(await claim({ ...page, agedAfterMs: 3_600_000 }));
        const after = await withTransaction(db.current.pool, async (c) => (await queueClaim(c, page)).at(-1)!);
        const next = { ...page, after: { lane: after.lane, position: after.position } };
        expect(await claim(next)).toEqual(await claim({ ...next, agedAfterMs: 3_600_000 }));
        expect((await claim({ ...page, limit: 100 })).slice(0, 5)).toEqual(simple);
      }
    }
  });

  it('the aged lane adds entries of any shard that waited the fallback window', async () => {
    expect(await claim({ agedAfterMs: 15_000 })).toEqual([1, 3, 5, 7]);
    expect(await claim({ shards: [], agedAfterMs: 15_000 })).toEqual([3, 7]);
  });

  it('a site replica takes its site from any shard, leaves a live site\'s fresh work to it, and takes orphaned sites\' work', async () => {
    expect(await claim({ site: 'dc1', liveSites: ['dc1', 'dc2'] })).toEqual([1, 4, 6]);
    expect(await claim({ site: 'dc1', liveSites: ['dc1', 'dc2'], agedAfterMs: 15_000 })).toEqual([1, 3, 4, 6, 7]);
    // No shard at all (e.g. a replica that drew none): still its site and the orphans.
    expect(await claim({ shards: [], site: 'dc1', liveSites: ['dc1', 'dc2'] })).toEqual([4, 6]);
  });

  it('a site whose last replica left: its stamped work falls back at once', async () => {
    expect(await claim({ site: 'dc1', liveSites: ['dc1'] })).toEqual([1, 4, 5, 6, 7]);
  });

  it('an estate with no sites ignores stamps: shard ownership alone decides', async () => {
    expect(await claim({ site: null, liveSites: [] })).toEqual([1, 5, 7]);
  });

  it('the aged lane finds the longest-waiting entries at the head of each lane, however deep the queue behind them', async () => {
    await db.current.pool.query(`TRUNCATE queue_ready`);
    // Lane 1: three aged entries first. Lane 2: aged entries ahead of 300 fresh ones of another shard.
    await db.current.pool.query(
      `INSERT INTO queue_ready (step_id, run_id, shard, attempt, lane, ready_at, position)
       SELECT g, g, 3, 1, CASE WHEN g <= 3 THEN 1 ELSE 2 END, now() - CASE WHEN g <= 6 THEN interval '20 seconds' ELSE interval '1 second' END, g
         FROM generate_series(1, 306) g`,
    );
    expect(await claim({ agedAfterMs: 15_000 })).toEqual([1, 2, 3, 4, 5, 6]);
    // Paged within a tick: after (lane 2, position 4) only what follows it.
    expect(await claim({ agedAfterMs: 15_000, after: { lane: 2, position: 4 } })).toEqual([5, 6]);
    // A replica that owns every shard (no sites) takes everything in order, aged or not.
    const all = Array.from({ length: 64 }, (_, i) => i);
    expect((await claim({ shards: all, agedAfterMs: 15_000, limit: 8 }))).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('rows another transaction holds are skipped, not waited for', async () => {
    const client = await db.current.pool.connect();
    try {
      await client.query('BEGIN');
      await queueClaim(client, { shards: [1], limit: 1 });
      expect(await claim({})).toEqual([5, 7]);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
