import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { seedRun } from '../support/seed.js';

/** A literal escape byte, or one shown as text by the terminal sanitiser: neither belongs in a pipe. */
// eslint-disable-next-line no-control-regex -- the escape byte itself is what must not appear
const ESCAPES = /\x1b|\\x1b|\[\d+m/;

describe('tables', () => {
  const db = useTestDatabase();
  const cli = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli([...args, '--database-url', db.current.url], env);

  it('are borderless aligned columns: a head line, then one line per entry', async () => {
    await seedRun(db.current.pool, { steps: Array.from({ length: 200 }, (_, i) => ({ name: `s${i}` })) });
    const out = await cli(['fleet', 'queue', '--limit', '200']);
    expect(out.code).toBe(0);
    const lines = out.stdout.trimEnd().split('\n');
    expect(out.stdout).not.toMatch(/[─│┌┐└┘├┤┬┴┼]/);
    const head = lines.findIndex((l) => /^step\b/.test(l) || /\bverdict\b/.test(l));
    expect(head).toBeGreaterThanOrEqual(0);
    const rows = lines.slice(head + 1).filter((l) => /\bs\d+\b/.test(l));
    expect(rows).toHaveLength(200);
    // 200 entries, a head and the summary: no rule between rows.
    expect(lines.length).toBeLessThanOrEqual(203);
    // Aligned: every row starts its second column where the head does.
    const col = (l: string) => /^\S+(?: \S+)*\s{2,}/.exec(l)![0].length;
    for (const r of rows) expect(col(r)).toBe(col(lines[head]));
  });

  it('carry no escape bytes in a pipe, with or without NO_COLOR, for templates and triggers too', async () => {
    const file = join(ROOT, 'examples', 'nightly-backup.yaml');
    expect((await cli(['templates', 'put', file])).code).toBe(0);
    const once = await cli(['triggers', 'once', 'add', 'nightly-backup', '--at', '+1h', '--json']);
    const id = JSON.parse(once.stdout).id as number;
    await db.current.pool.query(`INSERT INTO trigger_ticks (trigger_id, kind, template, due_at, outcome) VALUES ($1, 'once', 'nightly-backup', now(), 'fired')`, [id]);
    for (const env of [{ NO_COLOR: '1' }, { NO_COLOR: undefined, FORCE_COLOR: undefined }]) {
      for (const verb of [['templates', 'list'], ['triggers', 'list'], ['triggers', 'show', String(id)], ['runs', 'list'], ['fleet', 'runners']]) {
        const out = await cli(verb, env);
        expect(out.code, verb.join(' ')).toBe(0);
        expect(out.stdout, verb.join(' ')).not.toMatch(ESCAPES);
        expect(out.stdout, verb.join(' ')).not.toMatch(/[─│┌┐└┘]/);
      }
    }
    const listed = await cli(['templates', 'list']);
    expect(listed.stdout.split('\n')[0]).toMatch(/^template\s+version\s+max concurrent\s+daily ceiling\s+updated\s+by$/);
  });
});
