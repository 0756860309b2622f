import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Config } from '@oclif/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/cli.js';
import { PgLogWatch } from '../support/pg-log.js';
import { useTestDatabase } from '../support/db.js';
import { runInProcess } from '../support/inproc.js';
import { hostileNumber } from './hostile.js';

/**
 * The fuzz tier of the CLI's arguments: every verb (found through oclif's command list, so a new
 * verb is covered without editing this file) with hostile positional arguments and flag values,
 * against the store directly. An answer is an exit code of the contract (0, 2, 3, 4; 1 only as a
 * refusal that names its reason, never a crash); a refusal writes nothing; the store logs no error
 * of class 22 or 42. Values are what a shell can pass: argv cannot carry NUL or a lone surrogate.
 */
const SEED = 20_261_203;
const CASES_PER_VERB = Math.max(4, Math.round(Number(process.env.OPSCHAIN_FUZZ_CASES ?? 40) / 4));
/** Verbs that run until stopped, or start processes: not for a fuzz loop. */
const LONG_RUNNING = new Set(['server:start', 'runner', 'admin:queue']);
/** Flags that change where the verb goes or make it wait: fixed by the harness instead. */
const FIXED_FLAGS = new Set(['database-url', 'home', 'server', 'token', 'wait', 'follow', 'watch', 'interval', 'timeout', 'config', 'help']);
const CRASH = /TypeError|RangeError|ReferenceError|SyntaxError|Cannot read propert|is not a function|internal error|out of range|invalid input syntax|violates|stack/i;

const shellText = fc.oneof(
  fc.constantFrom('', ' ', '-', '--', '0', '-1', '1e21', '9999999999999999999', '2147483648', '1e-50', 'NaN', 'Infinity', '__proto__', '__proto__.x=1', 'constructor.prototype.x=1', 'a=b', '=', 'x'.repeat(5000), '\u001b[2J', 'line\nbreak', '../../etc/passwd', "'; DROP TABLE runs; --", 'ü', '%00'),
  hostileNumber.map(String),
  fc.string({ minLength: 1, maxLength: 12 }).filter((s) => !s.includes('\u0000')),
);

describe('fuzz: every CLI verb', { timeout: 180_000 }, () => {
  const db = useTestDatabase();
  const home = mkdtempSync(join(tmpdir(), 'opschain-fuzz-cli-'));
  const pgLog = new PgLogWatch();
  let countSql = '';
  beforeAll(async () => {
    pgLog.mark();
    const { rows } = await db.current.pool.query(`SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace ORDER BY relname`);
    countSql = `SELECT ${rows.map((r) => `(SELECT count(*) FROM ${r.relname})::int AS "${r.relname}"`).join(', ')}`;
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  const counts = async (): Promise<Record<string, number>> => (await db.current.pool.query(countSql)).rows[0];

  it('answers hostile arguments with an exit code of the contract, and a refusal writes nothing', async () => {
    const cfg = await Config.load(ROOT);
    const verbs = cfg.commands.filter((c) => !LONG_RUNNING.has(c.id) && !c.hidden);
    expect(verbs.length).toBeGreaterThan(20);
    const failures: string[] = [];
    let cases = 0;
    let before = await counts();
    for (const [i, cmd] of verbs.entries()) {
      const argNames = Object.keys(cmd.args ?? {});
      const flags = Object.entries(cmd.flags ?? {}).filter(([name]) => !FIXED_FLAGS.has(name) && name !== 'json');
      const input = fc.record({
        args: fc.array(shellText, { minLength: argNames.length, maxLength: argNames.length }),
        flags: fc.subarray(flags.map(([name]) => name), { maxLength: Math.min(3, flags.length) }),
        values: fc.array(shellText, { minLength: 3, maxLength: 3 }),
        json: fc.boolean(),
      });
      const outcome = await fc.check(
        fc.asyncProperty(input, async (c) => {
          cases++;
          const argv = [...cmd.id.split(':'), ...c.args];
          c.flags.forEach((name, k) => {
            const spec = (cmd.flags as Record<string, { type: string }>)[name];
            if (spec.type === 'boolean') argv.push(`--${name}`);
            else argv.push(`--${name}`, c.values[k]);
          });
          if (c.json) argv.push('--json');
          argv.push('--database-url', db.current.url, '--home', home);
          const r = await runInProcess(argv);
          const what = `opschain ${argv.slice(0, -4).map((a) => JSON.stringify(a.slice(0, 60))).join(' ')}: exit ${r.code}: ${(r.stderr || r.stdout).slice(0, 300)}`;
          if (![0, 1, 2, 3, 4].includes(r.code ?? -1)) throw new Error(what);
          if (CRASH.test(r.stderr)) throw new Error(`crashed: ${what}`);
          const after = await counts();
          if (r.code !== 0) {
            const changed = Object.keys(after).filter((t) => after[t] !== before[t]);
            if (changed.length) throw new Error(`refused verb changed the row count of ${changed.join(', ')}: ${what}`);
          }
          before = after;
        }),
        { seed: SEED + i, numRuns: CASES_PER_VERB, endOnFailure: true },
      );
      if (outcome.failed) failures.push(String((outcome.errorInstance as Error | undefined)?.message ?? 'failed').slice(0, 600));
    }
    console.log(`fuzz: ${cases} CLI cases over ${verbs.length} verbs (seed ${SEED}, ${CASES_PER_VERB} per verb)`);
    expect(failures).toEqual([]);
  });

  it('left no error of class 22 or 42 in the PostgreSQL log for this database', (t) => pgLog.expectClean(db.current.name, t));
});
