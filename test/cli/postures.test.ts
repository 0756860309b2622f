import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/db.js';
import { runCli } from '../support/cli.js';

describe('fleet posture levers', () => {
  const db = useTestDatabase();
  const cli = (...args: string[]) => runCli([...args, '--json', '--database-url', db.current.url]);

  it('quiesce and resume the fleet: durable, idempotent, audited once', async () => {
    const first = await cli('admin', 'server', 'quiesce', '--reason', 'deploying');
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ changed: true, posture: { quiesced: true, halted: false, reason: 'deploying' } });
    const again = await cli('admin', 'server', 'quiesce');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ changed: false, posture: { quiesced: true } });
    const resumed = await cli('admin', 'server', 'resume');
    expect(JSON.parse(resumed.stdout)).toMatchObject({ changed: true, posture: { quiesced: false } });
    const { rows } = await db.current.pool.query(`SELECT action FROM audit_log WHERE target = 'fleet' ORDER BY id`);
    expect(rows.map((r) => r.action)).toEqual(['server.quiesce', 'server.resume']);
  });

  it('halt and resume the platform', async () => {
    const halt = await cli('admin', 'platform', 'halt', '--reason', 'store failover');
    expect(JSON.parse(halt.stdout)).toMatchObject({ changed: true, posture: { halted: true, reason: 'store failover' } });
    expect((await db.current.pool.query('SELECT halted FROM fleet_posture')).rows[0].halted).toBe(true);
    const resume = await cli('admin', 'platform', 'resume');
    expect(JSON.parse(resume.stdout)).toMatchObject({ changed: true, posture: { halted: false } });
  });
});
