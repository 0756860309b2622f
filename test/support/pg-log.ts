import { existsSync, readFileSync, statSync } from 'node:fs';
import { expect, inject, type TestContext } from 'vitest';

/**
 * The embedded test server's log from a point on: `mark()` before the work, then `dataErrors`
 * lists the lines of one database with an error of class 22 (bad data) or 42 (bad SQL), which
 * hostile input must never reach. Undefined against an external server, whose log is not ours.
 */
export class PgLogWatch {
  private readonly file = inject('pgLog');
  private start = 0;

  mark(): void {
    this.start = this.file && existsSync(this.file) ? statSync(this.file).size : 0;
  }

  /** The test passes when the database's log lines since `mark()` hold no such error; skipped when the log is not ours. */
  expectClean(database: string, t: TestContext): void {
    const bad = this.dataErrors(database);
    if (!bad) {
      t.skip();
      return;
    }
    expect(bad).toEqual([]);
  }

  dataErrors(database: string): string[] | undefined {
    if (!this.file) return undefined;
    const text = readFileSync(this.file).subarray(this.start).toString('utf8');
    return text.split('\n').filter((l) => l.includes(`db=${database} `) && /sqlstate=(22|42)[0-9A-Z]{3}\b/.test(l));
  }
}
