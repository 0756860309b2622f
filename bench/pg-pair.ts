/**
 * A PostgreSQL primary with a synchronous streaming standby, started from the machine's own
 * binaries (initdb, pg_basebackup -R), for the failover tests. Clients reach the store through one
 * address, a TCP proxy that stands in for the VIP or DNS name an operator moves to the standby
 * when it promotes it. Every server started here is stopped by stop(), and by a process 'exit'
 * hook if the test process dies first.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createPool } from '../src/store/pool.js';
import { FaultProxy as TcpProxy } from './fault-proxy.js';
import { freePort } from './procs.js';

const TOOLS = ['initdb', 'postgres', 'pg_basebackup'];

/**
 * The directory of the machine's PostgreSQL server binaries (15 first, as CI has), or why there
 * is none: the failover test then skips, saying so.
 */
export function pgBinaries(): { dir: string } | { missing: string } {
  const candidates = ['/usr/lib/postgresql/15/bin'];
  if (existsSync('/usr/lib/postgresql')) {
    for (const v of readdirSync('/usr/lib/postgresql').sort().reverse()) candidates.push(join('/usr/lib/postgresql', v, 'bin'));
  }
  const dir = candidates.find((d) => TOOLS.every((t) => existsSync(join(d, t))));
  if (dir) return { dir };
  return { missing: `no PostgreSQL server binaries (${TOOLS.join(', ')}) under /usr/lib/postgresql/*/bin: install the postgresql package (apt-get install postgresql-15)` };
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) killGroup(c);
});

function killGroup(c: ChildProcess): void {
  try {
    // Detached: the postmaster leads its own process group, so its backends go with it.
    process.kill(-c.pid!, 'SIGKILL');
  } catch {
    // gone
  }
}

/** PostgreSQL refuses to run as root: as root, it runs as the `postgres` user. */
function serverIds(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  try {
    return { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) };
  } catch {
    throw new Error("running the tests as root needs a 'postgres' system user for the PostgreSQL servers (useradd -r postgres)");
  }
}

function run(cmd: string, args: string[], ids: { uid?: number; gid?: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...ids, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C', LANG: 'C' } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd.split('/').pop()} ${args.join(' ')}: exit ${code}: ${out.trim().split('\n').slice(-3).join(' | ')}`))));
  });
}

/** One postgres server process, started detached so that a kill -9 takes its whole process group. */
class PgServer {
  private child?: ChildProcess;
  output: string[] = [];

  constructor(readonly dataDir: string, readonly port: number, private readonly bin: string, private readonly ids: { uid?: number; gid?: number }) {}

  start(settings: Record<string, string>, ready: RegExp): Promise<void> {
    const args = ['-D', this.dataDir, '-p', String(this.port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
    const child = spawn(join(this.bin, 'postgres'), args, { ...this.ids, detached: true, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C', LANG: 'C' } });
    this.child = child;
    live.add(child);
    child.on('exit', () => live.delete(child));
    return new Promise((resolve, reject) => {
      let up = false;
      child.stderr!.on('data', (d: Buffer) => {
        for (const line of d.toString().split('\n')) if (line.trim()) this.output.push(line.trim());
        if (this.output.length > 200) this.output.splice(0, this.output.length - 200);
        if (!up && ready.test(d.toString())) {
          up = true;
          resolve();
        }
      });
      child.on('error', reject);
      child.on('exit', (code) => {
        if (!up) reject(new Error(`postgres on port ${this.port} exited (${code}) before it was ready: ${this.output.slice(-5).join(' | ')}`));
      });
    });
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** kill -9 of the postmaster and every backend: the machine died. */
  async kill(): Promise<void> {
    const c = this.child;
    if (!c || !this.running) return;
    const exited = new Promise((r) => c.once('exit', r));
    killGroup(c);
    await exited;
  }

  /** A fast shutdown (SIGINT), kill -9 after a grace. */
  async stop(): Promise<void> {
    const c = this.child;
    if (!c || !this.running) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGINT');
    const timer = setTimeout(() => killGroup(c), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

export interface PgPairOptions {
  /** The database created on the primary (replicated to the standby). */
  database: string;
  /** Synchronous replication (the default): a commit returns once the standby has flushed it. */
  synchronous?: boolean;
}

export class PgPair {
  readonly vip: TcpProxy;
  private primary?: PgServer;
  private standby?: PgServer;
  private readonly dir: string;
  private readonly ids = serverIds();

  private constructor(private readonly bin: string, private readonly opts: PgPairOptions) {
    this.dir = mkdtempSync(join(tmpdir(), 'opschain-pgpair-'));
    this.vip = new TcpProxy('127.0.0.1', 1);
  }

  /** initdb, the primary, the database, pg_basebackup -R, the standby, and streaming in sync. */
  static async start(bin: string, opts: PgPairOptions): Promise<PgPair> {
    const pair = new PgPair(bin, opts);
    try {
      await pair.boot();
      return pair;
    } catch (err) {
      await pair.stop();
      throw err;
    }
  }

  /** The one address every client uses (the proxy), with the database. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.vip.port}/${this.opts.database}`;
  }

  /** The standby itself, not through the address (to promote it, or read from it). */
  get standbyUrl(): string {
    return `postgres://postgres@127.0.0.1:${this.standby!.port}/${this.opts.database}`;
  }

  get primaryUrl(): string {
    return `postgres://postgres@127.0.0.1:${this.primary!.port}/${this.opts.database}`;
  }

  private own(path: string): void {
    if (this.ids.uid !== undefined) chownSync(path, this.ids.uid, this.ids.gid!);
  }

  private async boot(): Promise<void> {
    this.own(this.dir);
    // The servers run as postgres: every ancestor of their directories must be traversable.
    for (let cur = dirname(this.dir); this.ids.uid !== undefined; cur = dirname(cur)) {
      const st = statSync(cur);
      if ((st.mode & 0o001) === 0) chmodSync(cur, st.mode | 0o001);
      if (dirname(cur) === cur) break;
    }
    const primaryDir = join(this.dir, 'primary');
    const standbyDir = join(this.dir, 'standby');
    // Trust on loopback only: a throwaway cluster of the test, replication connections included.
    await run(join(this.bin, 'initdb'), [`--pgdata=${primaryDir}`, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C', '--no-sync'], this.ids);
    this.primary = new PgServer(primaryDir, await freePort(), this.bin, this.ids);
    const sync = this.opts.synchronous !== false;
    await this.primary.start(
      {
        wal_level: 'replica',
        max_wal_senders: '4',
        max_connections: '200',
        synchronous_standby_names: sync ? '*' : '',
        synchronous_commit: 'on',
        // The machine's disks are not what this test is about; the standby's memory holds what it confirmed.
        fsync: 'off',
        full_page_writes: 'off',
      },
      /ready to accept connections/,
    );
    this.vip.retarget(this.primary.port);
    await this.vip.start();
    // Until the standby streams, a synchronous primary would hold every commit: create the database first.
    const admin = createPool(`postgres://postgres@127.0.0.1:${this.primary.port}/postgres`, { max: 1 });
    try {
      await admin.query(`SET synchronous_commit = local`);
      await admin.query(`CREATE DATABASE ${this.opts.database}`);
    } finally {
      await admin.end();
    }
    mkdirSync(standbyDir, { mode: 0o700 });
    this.own(standbyDir);
    await run(join(this.bin, 'pg_basebackup'), ['-h', '127.0.0.1', '-p', String(this.primary.port), '-U', 'postgres', '-D', standbyDir, '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'], this.ids);
    this.standby = new PgServer(standbyDir, await freePort(), this.bin, this.ids);
    // The standby's copy of the settings is the primary's: once promoted it must not wait for a standby of its own.
    await this.standby.start({ max_connections: '200', synchronous_standby_names: '', fsync: 'off', full_page_writes: 'off', hot_standby: 'on' }, /ready to accept read-only connections/);
    await this.waitFor(`SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = '${sync ? 'sync' : 'async'}'`, this.primaryUrl, 'the standby streaming');
  }

  private async waitFor(sql: string, url: string, what: string, timeoutMs = 30_000): Promise<void> {
    const pool = createPool(url, { max: 1 });
    try {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const ok = await pool.query(sql).then((r) => (r.rowCount ?? 0) > 0, () => false);
        if (ok) return;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await pool.end();
    }
  }

  /** kill -9 of the primary and all its backends; the address refuses connections (it points at a dead host). */
  async killPrimary(): Promise<void> {
    this.vip.refuse();
    await this.primary?.kill();
  }

  /** Promotes the standby (pg_promote, waiting for the end of recovery); returns the store's clock at that moment. */
  async promote(): Promise<Date> {
    const pool = createPool(this.standbyUrl, { max: 1 });
    try {
      const { rows } = await pool.query(`SELECT pg_promote(true, 60) AS done`);
      if (!rows[0].done) throw new Error('the standby did not finish promotion within 60 s');
      return (await pool.query(`SELECT now() AS t`)).rows[0].t;
    } finally {
      await pool.end();
    }
  }

  /** The address now reaches the promoted standby. */
  switchAddress(): void {
    this.vip.retarget(this.standby!.port);
    this.vip.heal();
  }

  /** The last lines the servers logged, for a failure's message. */
  logs(): string {
    return [`primary:`, ...(this.primary?.output.slice(-15) ?? []), `standby:`, ...(this.standby?.output.slice(-15) ?? [])].join('\n');
  }

  async stop(): Promise<void> {
    await this.vip.stop();
    await Promise.all([this.primary?.stop(), this.standby?.stop()]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
