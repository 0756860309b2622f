import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postureExpiryPass } from '../../src/dispatch/postures.js';
import { postureLever } from '../../src/ops/domain/postures.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { leverNoticeOf } from '../../src/store/lever-notices.js';
import { QUEUE_CHANNEL } from '../../src/store/queue.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';

describe('lever notices on the queue channel (migration 0009)', () => {
  const db = useTestDatabase();
  let listener: pg.Client;
  const heard: string[] = [];
  let marks = 0;

  beforeAll(async () => {
    listener = new pg.Client({ connectionString: db.current.url });
    await listener.connect();
    listener.on('notification', (m) => heard.push(m.payload ?? ''));
    await listener.query(`LISTEN ${QUEUE_CHANNEL}`);
    await insertRunner(db.current.pool, { id: 'rnr_n1', name: 'n1', group: 'g1' });
    await insertRunner(db.current.pool, { id: 'rnr_n2', name: 'n2', group: 'g:x' });
  });
  afterAll(async () => listener?.end());

  /** What the channel carried for `write`, up to a marker sent after it commits. */
  const notices = async (write: () => Promise<unknown>): Promise<string[]> => {
    heard.length = 0;
    await write();
    const mark = `mark:${++marks}`;
    await db.current.pool.query(`SELECT pg_notify($1, $2)`, [QUEUE_CHANNEL, mark]);
    await waitFor(() => heard.includes(mark), { what: mark });
    return heard.slice(0, heard.indexOf(mark));
  };

  it('each posture change, by a lever or by the leader at its --until, announces the flags it commits; a lever that changes nothing announces nothing', async () => {
    const pool = db.current.pool;
    expect(await notices(() => postureLever(pool, { fields: ['halted'], value: true, actor: 'a' }))).toEqual(['posture:halted']);
    expect(await notices(() => postureLever(pool, { fields: ['halted'], value: true, reason: 'again', actor: 'a' }))).toEqual([]);
    expect(await notices(() => postureLever(pool, { fields: ['system_quiesced'], value: true, actor: 'a' }))).toEqual(['posture:halted,system_quiesced']);
    // Platform resume lifts two flags in one transaction: one notice, of the state it commits.
    expect(await notices(() => postureLever(pool, { fields: ['halted', 'system_quiesced'], value: false, actor: 'a' }))).toEqual(['posture:']);
    expect(await notices(() => postureLever(pool, { fields: ['quiesced'], value: true, until: { afterMs: 3_600_000 }, actor: 'a' }))).toEqual(['posture:quiesced']);
    expect(await notices(() => postureExpiryPass({ pool, replicaId: 'leader-test' }, { now: new Date(Date.now() + 7_200_000) }))).toEqual(['posture:']);
    // Any writer: a bare UPDATE of the row announces as a lever does.
    expect(await notices(() => pool.query(`UPDATE fleet_posture SET quiesced = true WHERE id`))).toEqual(['posture:quiesced']);
    expect(await notices(() => pool.query(`UPDATE fleet_posture SET quiesced = false WHERE id`))).toEqual(['posture:']);
    expect(leverNoticeOf('posture:halted,system_quiesced')).toEqual({ lever: 'posture', inForce: ['halted', 'system_quiesced'] });
    expect(leverNoticeOf('posture:')).toEqual({ lever: 'posture', inForce: [] });
  });

  it('a runner or a group drained or undrained announces itself; a drain that changes nothing announces nothing', async () => {
    const pool = db.current.pool;
    expect(await notices(() => fleetDrainSet(pool, { runner: 'n1', drained: true, actor: 'a' }))).toEqual(['drain:runner:on:rnr_n1']);
    expect(await notices(() => fleetDrainSet(pool, { runner: 'n1', drained: true, actor: 'a' }))).toEqual([]);
    expect(await notices(() => fleetDrainSet(pool, { runner: 'rnr_n1', drained: false, actor: 'a' }))).toEqual(['drain:runner:off:rnr_n1']);
    // A group with no row yet (inserted drained), then lifted, then drained and its row deleted.
    expect(await notices(() => fleetDrainSet(pool, { group: 'g:x', drained: true, actor: 'a' }))).toEqual(['drain:group:on:g:x']);
    expect(await notices(() => fleetDrainSet(pool, { group: 'g:x', drained: false, actor: 'a' }))).toEqual(['drain:group:off:g:x']);
    expect(await notices(() => pool.query(`UPDATE runner_groups SET drained = true WHERE name = 'g:x'`))).toEqual(['drain:group:on:g:x']);
    expect(await notices(() => pool.query(`DELETE FROM runner_groups WHERE name = 'g:x'`))).toEqual(['drain:group:off:g:x']);
    expect(await notices(() => pool.query(`UPDATE runners SET drained = true WHERE id = 'rnr_n1'`))).toEqual(['drain:runner:on:rnr_n1']);
    // Other writes to the rows announce nothing here.
    expect(await notices(() => pool.query(`UPDATE runners SET last_seen_at = now(), drain_reason = 'x' WHERE id = 'rnr_n1'`))).toEqual([]);
    expect(leverNoticeOf('drain:group:on:g:x')).toEqual({ lever: 'drain', target: 'group', name: 'g:x', drained: true });
    expect(leverNoticeOf('drain:runner:off:rnr_n1')).toEqual({ lever: 'drain', target: 'runner', name: 'rnr_n1', drained: false });
    expect(leverNoticeOf('')).toBeNull();
    expect(leverNoticeOf('pool:db')).toBeNull();
  });
});
