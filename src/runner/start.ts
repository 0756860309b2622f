import { mkdirSync } from 'node:fs';
import { availableParallelism, hostname, tmpdir, userInfo } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { readLocalSecret, readServerRecord } from '../home.js';
import type { Logger } from '../logger.js';
import { RunnerAgent, type AgentOptions } from './agent.js';
import { RunnerClient } from './client.js';
import { recordHistory } from './history.js';
import { ensureIdentity, identityPath, type RunnerIdentity } from './identity.js';
import { runnerLockAcquire } from './lock.js';
import { PROTOCOL_VERSION } from './protocol.js';
import { parsePassEnv, resolveStepUser, type StepUser } from './step-env.js';
import { StepRecords } from './step-records.js';

export interface RunnerSettings {
  home: string;
  /** As given (repeated and/or comma-separated); empty: OPSCHAIN_SERVER, then the local server. */
  servers: string[];
  registrationToken?: string;
  name?: string;
  group?: string;
  labels: string[];
  executors: string[];
  site?: string;
  maxLoad?: number;
  maxParallelSteps: number;
  workDir?: string;
  graceMs: number;
  killGraceMs?: number;
  once: boolean;
  env?: NodeJS.ProcessEnv;
  /** `--pass-env`: more of the runner's environment for steps, by name or `PREFIX_*`. */
  passEnv?: string[];
  /** `--step-user`: the unprivileged account steps run as. */
  stepUser?: string;
  /** Append every step start and finish to this file (JSON lines; see history.ts). */
  history?: string;
  /** How a step's command runs (default: `/bin/sh -c`); see AgentOptions. */
  execute?: AgentOptions['execute'];
}

export class RunnerSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunnerSetupError';
  }
}

/** `a,b` and repeated flags flattened, trimmed, de-duplicated, in order. */
export function parseServerList(values: string[]): string[] {
  const out: string[] = [];
  for (const v of values) {
    for (const part of v.split(',')) {
      const s = part.trim().replace(/\/+$/, '');
      if (!s) continue;
      let u: URL;
      try {
        u = new URL(s);
      } catch {
        throw new RunnerSetupError(`--server ${s}: not a URL (expected http://host:port)`);
      }
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new RunnerSetupError(`--server ${s}: expected an http:// or https:// URL`);
      if (!out.includes(s)) out.push(s);
    }
  }
  return out;
}

/**
 * Where steps run: never inside the home, which holds the admin token, the store URL and the
 * runner's credential. Default: a directory of this runner's under the system's temp directory.
 */
export function resolveWorkDir(given: string | undefined, home: string, name: string): string {
  const dir = resolve(given ?? join(tmpdir(), `opschain-work-${userInfo().uid}`, name.replace(/[^A-Za-z0-9._-]/g, '_')));
  const h = resolve(home);
  if (dir === h || dir.startsWith(h + sep)) {
    throw new RunnerSetupError(`--work-dir ${dir}: overlaps the opschain home ${h}, which holds secrets; steps must run outside it`);
  }
  return dir;
}

function localServer(home: string): string[] | undefined {
  const url = readServerRecord(home)?.url;
  return url ? [url] : undefined;
}

/** Which servers to talk to: the flags, else OPSCHAIN_SERVER, else the server this machine runs. */
export function resolveServers(settings: Pick<RunnerSettings, 'servers' | 'home' | 'env'>): string[] {
  const env = settings.env ?? process.env;
  let servers = parseServerList(settings.servers);
  if (servers.length === 0 && env.OPSCHAIN_SERVER) servers = parseServerList([env.OPSCHAIN_SERVER]);
  if (servers.length === 0) {
    const local = readServerRecord(settings.home)?.url;
    if (local) servers = [local];
  }
  if (servers.length === 0) {
    throw new RunnerSetupError(`no server: pass --server URL (or OPSCHAIN_SERVER), or start one on this machine with 'opschain server start' (it records its address in ${settings.home})`);
  }
  return servers;
}

export interface PreparedRunner {
  agent: RunnerAgent;
  client: RunnerClient;
  identity: RunnerIdentity;
  identityFile: string;
  registered: boolean;
  servers: string[];
  name: string;
  workDir: string;
  /** Drops this process's hold on the runner's name; call once the agent has stopped. */
  unlock: () => void;
}

/** Resolves the settings, registers (or reloads the identity) and builds the agent, ready to run. */
export async function prepareRunner(settings: RunnerSettings, log: Logger, signal?: AbortSignal): Promise<PreparedRunner> {
  const env = settings.env ?? process.env;
  const servers = resolveServers(settings);
  const name = settings.name || hostname();
  const workDir = resolveWorkDir(settings.workDir, settings.home, name);
  let passEnv: string[];
  let stepUser: StepUser | undefined;
  try {
    passEnv = parsePassEnv(settings.passEnv ?? []);
    stepUser = settings.stepUser ? resolveStepUser(settings.stepUser) : undefined;
  } catch (err) {
    throw new RunnerSetupError((err as Error).message);
  }
  mkdirSync(workDir, { recursive: true, mode: 0o711 });
  const identityFile = identityPath(settings.home, name);
  mkdirSync(dirname(identityFile), { recursive: true, mode: 0o700 });
  const unlock = runnerLockAcquire(identityFile.replace(/\.json$/, '.lock'));
  // Servers found through the home's server.json are looked up there again when calls fail.
  const fromHome = settings.servers.length === 0 && !env.OPSCHAIN_SERVER;
  const client = new RunnerClient({ servers, log, rediscover: fromHome ? () => localServer(settings.home) : undefined });
  const registrationToken = settings.registrationToken || env.OPSCHAIN_REGISTRATION_TOKEN || readLocalSecret(settings.home, 'registration');
  try {
    const { identity, registered } = await ensureIdentity({
      file: identityFile,
      client,
      registrationToken,
      servers,
      signal,
      registration: {
        name,
        group: settings.group,
        labels: settings.labels,
        executors: settings.executors.length ? settings.executors : ['shell'],
        max_load: settings.maxLoad ?? availableParallelism(),
        max_parallel_steps: settings.maxParallelSteps,
        site: settings.site,
        protocol_version: PROTOCOL_VERSION,
      },
    });
    const records = new StepRecords(identityFile.replace(/\.json$/, '.steps'));
    records.reapOrphans(log);
    const agent = new RunnerAgent({
      client,
      log,
      workDir,
      maxParallelSteps: settings.maxParallelSteps,
      graceMs: settings.graceMs,
      killGraceMs: settings.killGraceMs,
      once: settings.once,
      pollWaitMs: identity.pollWindowMs,
      baseEnv: env,
      passEnv,
      stepUser,
      records,
      execute: settings.execute,
    });
    if (settings.history) recordHistory(agent.events, settings.history, identity.runnerId);
    return { agent, client, identity, identityFile, registered, servers, name, workDir, unlock };
  } catch (err) {
    unlock();
    throw err;
  }
}
