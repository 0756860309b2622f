import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/db.js';
import { runCli } from '../support/cli.js';

describe('fleet posture levers', () => {
  const db = useTestDatabase();
  const cli = (...args: string[]) => runCli([...args, '--json', '--database-url', db.current.url]);

  it('quiesce and resume the fleet: durable, idempotent, audited once', async () => {
    const first = await cli('fleet', 'quiesce', '--reason', 'deploying');
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ changed: true, posture: { fleetQuiesced: true, quiesced: true, halted: false, reason: 'deploying' } });
    const again = await cli('fleet', 'quiesce');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ changed: false, posture: { fleetQuiesced: true } });
    const resumed = await cli('fleet', 'resume');
    expect(JSON.parse(resumed.stdout)).toMatchObject({ changed: true, posture: { fleetQuiesced: false, quiesced: false } });
    const { rows } = await db.current.pool.query(`SELECT action FROM audit_log WHERE target = 'fleet' ORDER BY id`);
    expect(rows.map((r) => r.action)).toEqual(['server.quiesce', 'server.resume']);
  });

  it('the former names, admin server quiesce and resume, still work and say they are deprecated', async () => {
    const q = await runCli(['admin', 'server', 'quiesce', '--reason', 'old script', '--database-url', db.current.url]);
    expect(q.code).toBe(0);
    expect(q.stdout.trim()).toBe('fleet quiesced: no new offers');
    // oclif wraps the warning to the terminal's width.
    expect(q.stderr.replace(/\s*›\s*/g, ' ')).toMatch(/"admin server quiesce" command has been deprecated\. Use\s+"fleet quiesce" instead/);
    const json = await cli('admin', 'server', 'resume');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ changed: true, posture: { fleetQuiesced: false, quiesced: false } });
  });

  it('halt and resume the platform', async () => {
    const halt = await cli('admin', 'platform', 'halt', '--reason', 'store failover');
    expect(JSON.parse(halt.stdout)).toMatchObject({ changed: true, posture: { halted: true, reason: 'store failover' } });
    expect((await db.current.pool.query('SELECT halted FROM fleet_posture')).rows[0].halted).toBe(true);
    const resume = await cli('admin', 'platform', 'resume');
    expect(JSON.parse(resume.stdout)).toMatchObject({ changed: true, posture: { halted: false } });
  });

  it('system quiesce carries reason, actor and --until; platform resume lifts it; bad --until exits 2 writing nothing', async () => {
    const bad = await cli('admin', 'platform', 'quiesce', '--until', 'soon');
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stdout).error.message).toMatch(/^--until: expected a duration/);
    expect((await db.current.pool.query('SELECT system_quiesced FROM fleet_posture')).rows[0].system_quiesced).toBe(false);

    const q = await cli('admin', 'platform', 'quiesce', '--reason', 'store upgrade', '--until', '1h');
    expect(q.code).toBe(0);
    const body = JSON.parse(q.stdout);
    expect(body).toMatchObject({ changed: true, applied: ['system_quiesced'], posture: { systemQuiesced: true } });
    expect(body.posture.holds[0]).toMatchObject({ posture: 'system_quiesced', reason: 'store upgrade', actor: expect.stringMatching(/^cli:/) });
    expect(new Date(body.posture.holds[0].until).getTime() - new Date(body.posture.holds[0].since).getTime()).toBe(3_600_000);

    const human = await runCli(['admin', 'platform', 'quiesce', '--database-url', db.current.url]);
    expect(human.stdout.trim()).toBe('already quiesced: nothing changed');
    const resumed = await runCli(['admin', 'platform', 'resume', '--database-url', db.current.url]);
    expect(resumed.stdout.trim()).toBe('platform resumed');
    const { rows } = await db.current.pool.query(`SELECT action, detail->>'posture' AS posture FROM audit_log WHERE target = 'platform' ORDER BY id`);
    expect(rows).toEqual([
      { action: 'platform.halt', posture: 'halted' },
      { action: 'platform.resume', posture: 'halted' },
      { action: 'platform.quiesce', posture: 'system_quiesced' },
      { action: 'platform.resume', posture: 'system_quiesced' },
    ]);
  });
});
