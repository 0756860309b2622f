import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerConfig } from '../../src/config.js';
import { serverPlan } from '../../src/features.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { ServerHandle } from '../../src/server.js';
import type { Pool } from '../../src/store/pool.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { CliProcess } from '../support/cli.js';
import { waitFor } from '../support/db.js';
import { startTestServer } from '../support/server.js';
import { alive } from './process-state.js';

/**
 * A real server (production features, short lease TTL and poll window) and real runner
 * processes of the built CLI, with a scratch directory for side effects. stopAll() ends every
 * process it started and every step process group left behind by a killed runner.
 */
export class Fleet {
  readonly dir = mkdtempSync(join(tmpdir(), 'opschain-e2e-'));
  readonly servers: ServerHandle[] = [];
  readonly runners: CliProcess[] = [];
  registrationToken = '';
  private strayPids = new Set<number>();

  constructor(private readonly pool: Pool, private readonly databaseUrl: string) {}

  async startServer(opts: { leaseTtlMs?: number; pollWindowMs?: number; databaseUrl?: string; config?: Partial<ServerConfig> } = {}): Promise<ServerHandle> {
    const server = await startTestServer(opts.databaseUrl ?? this.databaseUrl, { plan: serverPlan(), config: { leaseTtlMs: opts.leaseTtlMs ?? 6_000, pollWindowMs: opts.pollWindowMs ?? 2_000, ...opts.config } });
    this.servers.push(server);
    if (!this.registrationToken) this.registrationToken = (await tokenCreate(this.pool, { kind: 'registration', name: 'e2e' })).secret;
    return server;
  }

  /** `opschain runner` with its own home and work directory (kept per name, so a restart finds its identity). */
  runner(name: string, args: string[] = [], servers = [this.servers[0].url]): CliProcess {
    const home = join(this.dir, `home-${name}`);
    const proc = new CliProcess(
      ['runner', '--server', servers.join(','), '--registration-token', this.registrationToken, '--name', name, '--work-dir', join(this.dir, `work-${name}`), '--log-level', 'info', ...args],
      { OPSCHAIN_HOME: home, OPSCHAIN_SERVER: '', OPSCHAIN_REGISTRATION_TOKEN: '', OPSCHAIN_LOG_LEVEL: '' },
    );
    this.runners.push(proc);
    return proc;
  }

  /** Waits for the runner's first poll to be logged as ready; returns its runner id. */
  async ready(proc: CliProcess): Promise<string> {
    const m = await proc.waitForOutput(/"runner_id":"(rnr_[0-9a-f]+)"/, 60_000);
    return m[1];
  }

  async submit(definition: Record<string, unknown>): Promise<number> {
    const { runId } = await runSubmit(this.pool, runFileLoad(JSON.stringify(definition)), { actor: 'e2e' });
    return runId;
  }

  async runDone(runId: number, timeoutMs = 60_000): Promise<{ status: string; cause: string | null }> {
    return waitFor(
      async () => (await this.pool.query(`SELECT status, cause FROM runs WHERE id = $1 AND status <> 'running'`, [runId])).rows[0],
      { timeoutMs, what: `run ${runId} to finish` },
    );
  }

  async steps(runId: number): Promise<Record<string, { status: string; attempt: number; runner_id: string | null; exit_code: number | null; cause: string | null }>> {
    const { rows } = await this.pool.query('SELECT name, status, attempt, runner_id, exit_code, cause FROM steps WHERE run_id = $1', [runId]);
    return Object.fromEntries(rows.map((r) => [r.name, { status: r.status, attempt: r.attempt, runner_id: r.runner_id, exit_code: r.exit_code, cause: r.cause }]));
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  lines(name: string): string[] {
    const file = this.path(name);
    return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
  }

  /** A pid a step wrote to a file; remembered so stopAll() can end it if a test did not. */
  async pidFrom(name: string): Promise<number> {
    const pid = await waitFor(() => {
      const l = this.lines(name);
      return l.length ? Number(l[0]) : 0;
    }, { what: `pid in ${name}` });
    this.strayPids.add(pid);
    return pid;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.runners.splice(0).map((r) => r.stop('SIGKILL')));
    for (const pid of this.strayPids) {
      if (!alive(pid)) continue;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
    await Promise.all(this.servers.splice(0).map((s) => s.stop().catch(() => {})));
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
