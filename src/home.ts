import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

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
