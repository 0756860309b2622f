import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { Fleet } from '../runner/e2e-support.js';

const TMUX = ['/usr/bin/tmux', '/usr/local/bin/tmux'].find((p) => existsSync(p));
if (!TMUX) console.warn('tmux not found: the console end-to-end test in a real terminal is skipped');

/** A private tmux server (its own socket), so nothing of the user's sessions is touched. */
class Terminal {
  readonly socket = `opschain-test-${randomBytes(4).toString('hex')}`;
  constructor(private readonly tmux: string) {}

  private run(args: string[]): string {
    return execFileSync(this.tmux, ['-L', this.socket, ...args], { encoding: 'utf8', timeout: 10_000 });
  }

  start(command: string, columns: number, rows: number): void {
    this.run(['new-session', '-d', '-s', 'console', '-x', String(columns), '-y', String(rows), command]);
  }

  screen(): string {
    return this.run(['capture-pane', '-p', '-t', 'console']);
  }

  /** One key at a time, as a person types. */
  async keys(...keys: string[]): Promise<void> {
    for (const k of keys) {
      this.run(['send-keys', '-t', 'console', k]);
      await new Promise((r) => setTimeout(r, 150));
    }
  }

  format(f: string): string {
    return this.run(['display-message', '-p', '-t', 'console', f]).trim();
  }

  resize(columns: number, rows: number): void {
    this.run(['resize-window', '-t', 'console', '-x', String(columns), '-y', String(rows)]);
  }

  async until(pattern: RegExp, what: string, timeoutMs = 30_000): Promise<string> {
    let last = '';
    try {
      return (await waitFor(() => {
        last = this.screen();
        return pattern.test(last) ? last : undefined;
      }, { timeoutMs, intervalMs: 100, what }))!;
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- screen ---\n${last}`);
    }
  }

  kill(): void {
    try {
      this.run(['kill-server']);
    } catch {
      // already gone
    }
  }
}

/** The 8×8 grid's rows: two-space indent, then eight owner letters (or · for unowned). */
function gridOwners(screen: string): string[] {
  return screen
    .split('\n')
    .filter((l) => /^ {2}([A-Z·] ){7}[A-Z·]/.test(l))
    .flatMap((l) => l.slice(2, 17).split(' '));
}

describe.skipIf(!TMUX)('the console in a real terminal', () => {
  const db = useTestDatabase();
  let fleet: Fleet;
  let term: Terminal;
  let runner: ReturnType<Fleet['runner']> | undefined;
  afterAll(async () => {
    term?.kill();
    // A clean stop first: the runner stops its step (no grace) instead of leaving it behind.
    await runner?.stop('SIGTERM');
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  it('shows lanes, a lease and the shard grid, moves shards when a replica stops, drains from the dashboard, and q restores the terminal', async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer({ leaseTtlMs: 120_000 });
    const second = await fleet.startServer({ leaseTtlMs: 120_000 });
    runner = fleet.runner('tmux-a', ['--grace', '1s']);
    const runnerId = await fleet.ready(runner);
    const runId = await fleet.submit({ name: 'deploy-web', project: 'acme', target: 'acme/prod/web', steps: { build: { run: 'sleep 120' }, gpu: { run: 'true', placement: { labels: ['gpu'] } } } });
    await waitFor(async () => (await db.current.pool.query(`SELECT 1 FROM step_leases WHERE run_id = $1 AND runner_id IS NOT NULL`, [runId])).rowCount, { what: 'a delivered lease' });
    // Both replicas hold shards before the dashboard opens.
    await waitFor(async () => (await db.current.pool.query(`SELECT count(DISTINCT holder)::int AS n FROM coordination_leases WHERE name LIKE 'shard:%'`)).rows[0].n === 2, { what: 'shards on two replicas' });

    term = new Terminal(TMUX!);
    term.start(`env NO_COLOR=1 ${process.execPath} ${BIN} admin queue --watch --interval 0.5 --database-url '${db.current.url}'; echo "EXITED $?"; sleep 120`, 80, 24);
    const first = await term.until(/bulk\s+1 ready\s+1 leased/, 'the lanes');
    expect(term.format('#{alternate_on}')).toBe('1');
    expect(first).toMatch(/Leases\s+1 live/);
    expect(first).toMatch(/build\s+\d+ deploy…?\s+acme\/pro…?\s+tmux-a/);
    expect(first.trimEnd().split('\n').length).toBeLessThanOrEqual(24);
    expect(new Set(gridOwners(first))).toEqual(new Set(['A', 'B']));

    // A clean stop hands the second replica's shards over: the grid turns to one owner.
    await second.stop();
    fleet.servers.splice(fleet.servers.indexOf(second), 1);
    await waitFor(() => {
      const owners = gridOwners(term.screen());
      return owners.length === 64 && owners.every((o) => o === 'A');
    }, { what: 'every shard on the remaining replica', timeoutMs: 30_000 });
    expect(term.screen()).toMatch(/B \S+ 0 stopped/);

    // Waiting: the unplaceable step, listed and explained.
    await term.keys('Tab', 'Tab', 'Tab');
    await term.until(/\* Waiting/, 'the waiting pane focused');
    await term.keys('Enter');
    await term.until(/› no_runner_matches/, 'the group listed');
    await term.keys('e');
    await term.until(/closest runner tmux-a lacks: no label gpu/, 'the explanation');
    await term.keys('Escape', 'Escape');

    // Drain from the dashboard: asked, confirmed, in the store.
    await term.keys('Tab');
    await term.until(/\* Runners/, 'the runners pane focused');
    await term.keys('d');
    await term.until(/Drain runner tmux-a\?/, 'the confirmation');
    expect((await db.current.pool.query(`SELECT drained FROM runners WHERE id = $1`, [runnerId])).rows[0].drained).toBe(false);
    await term.keys('y');
    await term.until(/runner tmux-a drained/, 'the drain reported');
    const { rows } = await db.current.pool.query(`SELECT drained, drain_reason FROM runners WHERE id = $1`, [runnerId]);
    expect(rows[0]).toEqual({ drained: true, drain_reason: 'drained from the console' });
    await term.until(/1 runner drained/, 'the drain banner');

    // A bigger terminal: the dashboard re-measures and grows into two columns.
    term.resize(200, 50);
    await term.until(/Lanes.*Shards/, 'two columns after the resize');

    await term.keys('q');
    const after = await term.until(/EXITED 0/, 'the console to exit');
    expect(after).not.toMatch(/Lanes/);
    expect(term.format('#{alternate_on}')).toBe('0');
    expect(term.format('#{cursor_flag}')).toBe('1');
  });
});
