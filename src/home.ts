import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { Conflict } from './errors.js';
import { processStartTime } from './runner/step-records.js';

/** `$OPSCHAIN_HOME`, default `~/.opschain`: where a machine's server leaves what other verbs need. */
export function opschainHome(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.OPSCHAIN_HOME || join(homedir(), '.opschain'));
}

export interface StoreRecord { databaseUrl: string; embedded: boolean; port?: number; password?: string }
export interface ServerRecord { url: string; pid: number; replicaId: string; startedAt: string }

function readJson<T>(file: string): T | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** Written atomically with mode 0600: these files carry credentials. */
export function writeSecretFile(file: string, content: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

export function ensureHome(home: string): void {
  mkdirSync(home, { recursive: true, mode: 0o700 });
}

export const storeRecordPath = (home: string) => join(home, 'store.json');
export const serverRecordPath = (home: string) => join(home, 'server.json');

export function readStoreRecord(home: string): StoreRecord | undefined {
  return readJson<StoreRecord>(storeRecordPath(home));
}
export function writeStoreRecord(home: string, rec: StoreRecord): void {
  ensureHome(home);
  writeSecretFile(storeRecordPath(home), JSON.stringify(rec, null, 2) + '\n');
}
export function readServerRecord(home: string): ServerRecord | undefined {
  return readJson<ServerRecord>(serverRecordPath(home));
}
export function writeServerRecord(home: string, rec: ServerRecord): void {
  ensureHome(home);
  writeSecretFile(serverRecordPath(home), JSON.stringify(rec, null, 2) + '\n');
}
export function clearServerRecord(home: string, pid = process.pid): void {
  const rec = readServerRecord(home);
  if (rec && rec.pid === pid) rmSync(serverRecordPath(home), { force: true });
}

/** Secrets the local server hands to verbs on the same machine (admin token, registration token). */
export function readLocalSecret(home: string, name: string): string | undefined {
  const file = join(home, `${name}.token`);
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}
export function writeLocalSecret(home: string, name: string, value: string): void {
  ensureHome(home);
  writeSecretFile(join(home, `${name}.token`), value + '\n');
}

export const serverLockPath = (home: string) => join(home, 'server.lock');

interface HomeLock { pid: number; startTime: string | null }

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false;
  }
}

function lockHolderAlive(lock: HomeLock): boolean {
  if (lock.pid === process.pid || isZombie(lock.pid)) return false;
  const started = processStartTime(lock.pid);
  // With /proc, a pid reused by another process since is not the holder; without it, the pid alone.
  if (started !== null || lock.startTime !== null) return started !== null && started === lock.startTime;
  try {
    process.kill(lock.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One server per home: a second `server start` on a home whose server runs would stop that
 * server's embedded PostgreSQL and, on its own exit, remove its server.json. The lock is a file
 * created exclusively; a lock left by a dead process is taken over. Throws Conflict naming the
 * running server's pid and URL. Returns the release function.
 */
export function homeLockAcquire(home: string): () => void {
  ensureHome(home);
  const file = serverLockPath(home);
  const mine: HomeLock = { pid: process.pid, startTime: processStartTime(process.pid) };
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, JSON.stringify(mine) + '\n', { mode: 0o600, flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
    }
    const held = readJson<HomeLock>(file);
    if (held && lockHolderAlive(held)) {
      const rec = readServerRecord(home);
      const url = rec && rec.pid === held.pid ? rec.url : 'its address not yet recorded';
      throw new Conflict(`an opschain server already runs on the home ${home} (pid ${held.pid}, ${url}); stop it first, or give this one its own --home`, 'home_locked');
    }
    // Stale: its process is gone. Take it over (one retry of the exclusive create).
    rmSync(file, { force: true });
  }
  return () => {
    const now = readJson<HomeLock>(file);
    if (now?.pid === process.pid) rmSync(file, { force: true });
  };
}
