import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';

describe('each posture keeps its own reason, actor and time', () => {
  const db = useTestDatabase();
  const cli = (...args: string[]) => runCli([...args, '--database-url', db.current.url]);

  it('three postures, three banners; a resume leaves the fleet banner and admin status alike; one resume, one audit row', async () => {
    expect((await cli('admin', 'platform', 'quiesce', '--reason', 'x')).code).toBe(0);
    expect((await cli('fleet', 'quiesce', '--reason', 'nc deploy')).code).toBe(0);
    expect((await cli('admin', 'platform', 'halt', '--reason', 'nc emergency')).code).toBe(0);

    const queue = await cli('admin', 'queue');
    expect(queue.code).toBe(0);
    const banners = queue.stdout.split('\n').filter((l) => /^(PLATFORM HALTED|SYSTEM QUIESCED|FLEET QUIESCED)/.test(l));
    expect(banners).toEqual([
      expect.stringMatching(/^PLATFORM HALTED: nc emergency \(cli:\w+ since \d{4}-/),
      expect.stringMatching(/^SYSTEM QUIESCED: x \(cli:\w+ since \d{4}-/),
      expect.stringMatching(/^FLEET QUIESCED: nc deploy \(cli:\w+ since \d{4}-/),
    ]);
    const json = JSON.parse((await cli('admin', 'queue', '--json')).stdout);
    expect(json.postures.holds.map((h: { posture: string; reason: string }) => [h.posture, h.reason])).toEqual([['halted', 'nc emergency'], ['system_quiesced', 'x'], ['quiesced', 'nc deploy']]);
    // The verdict names the reason of the posture that holds offers: the halt's.
    expect(json.postures.reason).toBe('nc emergency');

    expect((await cli('admin', 'platform', 'resume', '--reason', 'all clear')).code).toBe(0);
    const after = await cli('admin', 'queue');
    const left = after.stdout.split('\n').filter((l) => /^(PLATFORM HALTED|SYSTEM QUIESCED|FLEET QUIESCED)/.test(l));
    expect(left).toEqual([expect.stringMatching(/^FLEET QUIESCED: nc deploy \(cli:\w+ since \d{4}-/)]);
    const status = await cli('admin', 'status');
    expect(status.stdout).toMatch(/fleet posture: fleet quiesced by cli:\w+ since \S+: nc deploy\n/);
    expect(JSON.parse((await cli('admin', 'queue', '--json')).stdout).postures.reason).toBe('nc deploy');

    const { rows } = await db.current.pool.query(`SELECT action, detail FROM audit_log WHERE action = 'platform.resume'`);
    expect(rows).toHaveLength(1);
    expect(rows[0].detail).toMatchObject({ postures: ['halted', 'system_quiesced'], reason: 'all clear' });
  });
});
