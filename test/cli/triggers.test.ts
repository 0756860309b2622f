import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { runInProcess } from '../support/inproc.js';

describe('opschain templates and triggers', () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-triggers-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cli = (args: string[]) => runInProcess([...args, '--database-url', db.current.url]);
  const count = async (table: string) => (await db.current.pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n as number;

  it('puts versions, adds each kind of trigger, refuses bad input with exit 2 and writes nothing', async () => {
    const file = join(ROOT, 'examples', 'nightly-backup.yaml');
    expect((await cli(['templates', 'put', file])).stdout).toBe('template nightly-backup v1\n');
    const v2 = JSON.parse((await cli(['templates', 'put', file, '--max-concurrent-runs', '1', '--json'])).stdout);
    expect(v2).toMatchObject({ name: 'nightly-backup', version: 2, versions: 2, maxConcurrentRuns: 1, dailyCeiling: null });

    const bad = await cli(['triggers', 'schedule', 'add', 'nightly-backup', '--cron', '61 2 * * *']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('cron expression "61 2 * * *": Constraint error, got value 61 expected range 0-59');
    const badAt = await cli(['triggers', 'once', 'add', 'nightly-backup', '--at', 'tomorrow']);
    expect(badAt.code).toBe(2);
    expect(badAt.stderr).toContain('--at "tomorrow"');
    const badSet = await cli(['triggers', 'schedule', 'add', 'nightly-backup', '--cron', '0 2 * * *', '--set', 'stepz.x=1']);
    expect(badSet.code).toBe(2);
    expect(badSet.stderr).toContain('refuses these --set values');
    const noTemplate = await cli(['triggers', 'once', 'add', 'nope', '--at', '+1h']);
    expect(noTemplate.code).toBe(3);
    expect(await count('schedules')).toBe(0);
    expect(await count('one_shots')).toBe(0);

    const sched = JSON.parse((await cli(['triggers', 'schedule', 'add', 'nightly-backup', '--cron', '0 2 * * *', '--tz', 'Europe/Berlin', '--catch-up', 'last', '--json'])).stdout);
    expect(sched).toMatchObject({ kind: 'schedule', template: 'nightly-backup', cron: '0 2 * * *', tz: 'Europe/Berlin', overlap: 'skip', catchUp: 'last', enabled: true });
    expect(new Date(sched.nextDueAt).getTime()).toBeGreaterThan(Date.now());
    const hook = await cli(['triggers', 'webhook', 'add', 'nightly-backup', '--map', 'env.TARGET=$.target', '--url', 'http://ops.example:8080']);
    expect(hook.code).toBe(0);
    const secret = /secret: (ocwhk_\S+)/.exec(hook.stdout)![1];
    const hookId = Number(/trigger (\d+): webhook/.exec(hook.stdout)![1]);
    expect(hook.stdout).toContain(`url:    http://ops.example:8080/api/hooks/${hookId}`);

    const all = await cli(['triggers', 'list']);
    expect(all.code).toBe(0);
    expect(all.stdout).toContain('0 2 * * * (Europe/Berlin)');
    expect(all.stdout).not.toContain(secret);
    const shown = await cli(['triggers', 'show', String(hookId), '--json']);
    expect(shown.stdout).not.toContain(secret);
    // Added with the store's URL: owned by no token.
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: hookId, kind: 'webhook', path: `/api/hooks/${hookId}`, maps: [{ key: 'env.TARGET', path: '$.target' }], owner: null, ticks: [] });
    expect((await cli(['triggers', 'show', String(hookId)])).stdout).toContain("owner: none (added with the store's URL; answers until removed or disabled)");

    expect((await cli(['triggers', 'disable', String(sched.id)])).stdout).toBe(`trigger ${sched.id} disabled\n`);
    expect((await cli(['triggers', 'enable', String(sched.id), '--json'])).code).toBe(0);
    const inUse = await cli(['templates', 'remove', 'nightly-backup']);
    expect(inUse.code).toBe(4);
    expect((await cli(['triggers', 'remove', String(sched.id)])).code).toBe(0);
    expect((await cli(['triggers', 'remove', String(hookId)])).code).toBe(0);
    expect((await cli(['templates', 'remove', 'nightly-backup'])).stdout).toBe('template nightly-backup removed (2 versions)\n');
    expect((await cli(['admin', 'reconcile'])).code).toBe(0);
    writeFileSync(join(dir, 'bad.yaml'), 'name: x\nsteps: {}\nbogus: 1\n');
    expect((await cli(['templates', 'put', join(dir, 'bad.yaml')])).code).toBe(2);
    expect(await count('run_templates')).toBe(0);
  });
});
