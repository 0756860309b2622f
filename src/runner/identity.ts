import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeSecretFile } from '../home.js';
import type { RunnerClient } from './client.js';
import type { RegisterRequest } from './protocol.js';

/** What a runner keeps between restarts: who it is to the servers. */
export interface RunnerIdentity {
  runnerId: string;
  credential: string;
  name: string;
  registeredAt: string;
  /** The servers it registered with (informational). */
  servers: string[];
  leaseTtlMs?: number;
  pollWindowMs?: number;
}

/** `$OPSCHAIN_HOME/runner/<name>.json`: one identity per runner name on a machine. */
export function identityPath(home: string, name: string): string {
  return join(home, 'runner', `${name.replace(/[^A-Za-z0-9._-]/g, '_')}.json`);
}

export function readIdentity(file: string): RunnerIdentity | undefined {
  if (!existsSync(file)) return undefined;
  let parsed: Partial<RunnerIdentity>;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<RunnerIdentity>;
  } catch (err) {
    throw new Error(`runner identity ${file} is unreadable (${(err as Error).message}); move it away to register again`);
  }
  if (typeof parsed.runnerId !== 'string' || typeof parsed.credential !== 'string') {
    throw new Error(`runner identity ${file} lacks runnerId/credential; move it away to register again`);
  }
  return parsed as RunnerIdentity;
}

export function writeIdentity(file: string, identity: RunnerIdentity): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeSecretFile(file, JSON.stringify(identity, null, 2) + '\n');
}

export interface EnsureIdentityOptions {
  file: string;
  client: RunnerClient;
  /** Only needed when there is no identity yet. */
  registrationToken?: string;
  registration: Omit<RegisterRequest, 'registration_token'>;
  servers: string[];
  signal?: AbortSignal;
}

/**
 * The identity on disk, or a fresh registration saved (0600) before it is used, so a runner that
 * dies right after registering comes back as the same runner.
 */
export async function ensureIdentity(opts: EnsureIdentityOptions): Promise<{ identity: RunnerIdentity; registered: boolean }> {
  const existing = readIdentity(opts.file);
  if (existing) {
    opts.client.setCredential(existing.credential);
    return { identity: existing, registered: false };
  }
  if (!opts.registrationToken) {
    throw new MissingRegistrationTokenError(opts.file);
  }
  const reg = await opts.client.register({ ...opts.registration, registration_token: opts.registrationToken }, opts.signal);
  const identity: RunnerIdentity = {
    runnerId: reg.runner_id,
    credential: reg.credential,
    name: opts.registration.name,
    registeredAt: new Date().toISOString(),
    servers: opts.servers,
    leaseTtlMs: reg.lease_ttl_ms,
    pollWindowMs: reg.poll_window_ms,
  };
  writeIdentity(opts.file, identity);
  opts.client.setCredential(identity.credential);
  return { identity, registered: true };
}

export class MissingRegistrationTokenError extends Error {
  constructor(readonly file: string) {
    super(`no runner identity at ${file} and no registration token: pass --registration-token (or OPSCHAIN_REGISTRATION_TOKEN); 'opschain tokens create --registration' prints one`);
    this.name = 'MissingRegistrationTokenError';
  }
}
