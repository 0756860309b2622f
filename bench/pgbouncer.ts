/**
 * Debian's PgBouncer in front of a database, on a free loopback port, in the pool mode asked for.
 * `.ci/run` installs it where it is missing; without it the PgBouncer tests skip with a loud
 * message and `npm run chaos` leaves its restarts out, saying so. Run as the `postgres` user when
 * run as root (PgBouncer refuses root). restart() kills it (-9) and starts it again on the same
 * port, as a supervisor would; stop() ends it; a process 'exit' hook does too if the process that
 * started it dies first.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './procs.js';

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

export function pgbouncerBinary(): { path: string } | { missing: string } {
  const path = CANDIDATES.find((p) => existsSync(p));
  return path ? { path } : { missing: `PgBouncer is not installed (${CANDIDATES.join(', ')}): apt-get install -y pgbouncer (.ci/run does)` };
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export class PgBouncer {
  private child?: ChildProcess;
  output = '';
  private readonly dir = mkdtempSync(join(tmpdir(), 'opschain-pgbouncer-'));
  port = 0;

  /** `ignoreStartupParameters: false` leaves out the line operators must add (to see the start-up error naming it). */
  constructor(private readonly bin: string, private readonly targetUrl: string, private readonly mode: 'transaction' | 'session', private readonly opts: { ignoreStartupParameters?: boolean } = {}) {}

  /** The URL clients use: the target's user and database, PgBouncer's address. */
  get url(): string {
    const u = new URL(this.targetUrl);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    u.password = '';
    return u.toString();
  }

  async start(): Promise<void> {
    const u = new URL(this.targetUrl);
    const db = u.pathname.slice(1);
    const user = decodeURIComponent(u.username || 'postgres');
    // A restart keeps the port: clients are configured with one address.
    if (this.port === 0) this.port = await freePort();
    this.output = '';
    const conn = [`host=${u.hostname}`, `port=${u.port || 5432}`, `dbname=${db}`, `user=${user}`, ...(u.password ? [`password=${decodeURIComponent(u.password)}`] : [])];
    // The timeouts the pool would set as startup parameters (which PgBouncer does not pass on) are
    // set on each server connection instead, as docs/scaling.md tells operators to.
    writeFileSync(join(this.dir, 'users.txt'), `"${user}" ""\n`);
    writeFileSync(
      join(this.dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `${db} = ${conn.join(' ')} connect_query='SET statement_timeout = 10000; SET lock_timeout = 5000; SET idle_in_transaction_session_timeout = 30000'`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${this.port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${join(this.dir, 'users.txt')}`,
        `pool_mode = ${this.mode}`,
        ...(this.opts.ignoreStartupParameters === false ? [] : ['ignore_startup_parameters = statement_timeout, lock_timeout, idle_in_transaction_session_timeout, extra_float_digits']),
        'max_client_conn = 400',
        'default_pool_size = 20',
        'server_check_delay = 0',
        // A connect refused while the address points at a dead primary is retried within a second, not the default 15 s.
        'server_login_retry = 1',
        `admin_users = ${user}`,
        '',
      ].join('\n'),
    );
    let ids: { uid?: number; gid?: number } = {};
    if (process.getuid?.() === 0) {
      ids = { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) };
      for (const f of ['', 'users.txt', 'pgbouncer.ini']) chownSync(join(this.dir, f), ids.uid!, ids.gid!);
    }
    const child = spawn(this.bin, [join(this.dir, 'pgbouncer.ini')], { ...ids, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    live.add(child);
    child.on('exit', () => live.delete(child));
    child.stdout!.on('data', (d) => (this.output += d));
    child.stderr!.on('data', (d) => (this.output += d));
    await new Promise<void>((resolve, reject) => {
      const onData = () => {
        if (/process up|listening on/i.test(this.output)) resolve();
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.on('exit', (code) => reject(new Error(`pgbouncer exited (${code}) before it listened: ${this.output.slice(-1000)}`)));
    });
  }

  /** Transactions PgBouncer has passed to the database so far (its admin console's SHOW STATS). */
  async transactions(): Promise<number> {
    const u = new URL(this.url);
    const db = u.pathname.slice(1);
    u.pathname = '/pgbouncer';
    // The admin console speaks the simple query protocol only, and takes no startup parameters but the user's.
    const c = new pg.Client({ connectionString: u.toString() });
    await c.connect();
    try {
      const { rows } = await c.query('SHOW STATS');
      return Number(rows.find((r) => r.database === db)?.total_xact_count ?? 0);
    } finally {
      await c.end();
    }
  }

  /** Killed (-9: every client and server connection cut at once), down for `downMs`, started again on the same port. */
  async restart(downMs: number): Promise<void> {
    await this.end('SIGKILL');
    await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }

  private async end(sig: NodeJS.Signals): Promise<void> {
    const c = this.child;
    if (c && c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill(sig);
      const timer = setTimeout(() => c.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
  }

  async stop(): Promise<void> {
    await this.end('SIGINT');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
