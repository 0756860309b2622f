import { userInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { replicaRegister } from '../../src/store/replicas.js';
import { useTestDatabase } from '../support/db.js';
import { runCli } from '../support/cli.js';

describe('opschain admin status and admin replica quiesce|resume', () => {
  const db = useTestDatabase();
  const cli = (...args: string[]) => runCli([...args, '--database-url', db.current.url]);

  it('status --json lists replicas with their state; the table names the leader and postures', async () => {
    await replicaRegister(db.current.pool, { id: 'web-aaaaaa', host: 'web', site: 'dc1', version: '0.1.0' });
    await replicaRegister(db.current.pool, { id: 'web-bbbbbb', host: 'web', version: '0.1.0' });
    // Ages far from the 15 s window either way, so a slow CLI start cannot change a state.
    await db.current.pool.query(`UPDATE replicas SET heartbeat_at = now() + interval '1 hour' WHERE id = 'web-aaaaaa'`);
    await db.current.pool.query(`UPDATE replicas SET heartbeat_at = now() - interval '1 minute' WHERE id = 'web-bbbbbb'`);
    await db.current.pool.query(
      `INSERT INTO coordination_leases (name, holder, token, expires_at)
       SELECT 'shard:' || g, 'web-aaaaaa', 1, now() + interval '1 hour' FROM generate_series(0, 9) g
       UNION ALL SELECT 'leader', 'web-aaaaaa', 2, now() + interval '1 hour'`,
    );
    const r = await cli('admin', 'status', '--json');
    expect(r.code).toBe(0);
    const st = JSON.parse(r.stdout);
    expect(st.replicas.map((x: any) => [x.id, x.state, x.site, x.shards.length, x.leader])).toEqual([
      ['web-aaaaaa', 'live', 'dc1', 10, true],
      ['web-bbbbbb', 'dead', null, 0, false],
    ]);
    expect(st.leader).toMatchObject({ replicaId: 'web-aaaaaa', token: 2 });
    expect(st.shards).toMatchObject({ total: 64, owned: 10 });
    expect(st.postures).toMatchObject({ quiesced: false, halted: false });

    const human = await cli('admin', 'status');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/web-aaaaaa.*dc1.*live.*10 \(0-9\).*leader/);
    expect(human.stdout).toMatch(/web-bbbbbb.*dead/);
    expect(human.stdout).toMatch(/leader: web-aaaaaa \(token 2\)/);
    expect(human.stdout).toMatch(/shards owned: 10\/64, unowned: 10-63/);
    expect(human.stdout).toMatch(/fleet posture: normal/);
  });

  it('quiesce and resume are idempotent, audited, and refuse an unknown replica with exit 3', async () => {
    await replicaRegister(db.current.pool, { id: 'web-cccccc', host: 'web', version: '0.1.0' });
    await db.current.pool.query(`UPDATE replicas SET heartbeat_at = now() + interval '1 hour' WHERE id = 'web-cccccc'`);
    const q1 = await cli('admin', 'replica', 'quiesce', 'web-cccccc', '--json');
    expect(q1.code).toBe(0);
    expect(JSON.parse(q1.stdout)).toEqual({ id: 'web-cccccc', quiesced: true, changed: true });
    const q2 = await cli('admin', 'replica', 'quiesce', 'web-cccccc');
    expect(q2.code).toBe(0);
    expect(q2.stdout).toMatch(/already quiesced/);
    const st = JSON.parse((await cli('admin', 'status', '--json')).stdout);
    expect(st.replicas.find((x: any) => x.id === 'web-cccccc').state).toBe('quiesced');
    const r1 = await cli('admin', 'replica', 'resume', 'web-cccccc');
    expect(r1.code).toBe(0);
    expect(r1.stdout).toMatch(/resumed web-cccccc/);
    const missing = await cli('admin', 'replica', 'quiesce', 'nope-000000', '--json');
    expect(missing.code).toBe(3);
    expect(JSON.parse(missing.stdout).error.code).toBe('not_found');
    const { rows } = await db.current.pool.query(`SELECT actor, action FROM audit_log WHERE target = 'web-cccccc' ORDER BY id`);
    expect(rows).toEqual([
      { actor: `cli:${userInfo().username}`, action: 'replica.quiesce' },
      { actor: `cli:${userInfo().username}`, action: 'replica.quiesce' },
      { actor: `cli:${userInfo().username}`, action: 'replica.resume' },
    ]);
  });
});
