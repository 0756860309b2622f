import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Offer } from './protocol.js';

/**
 * What a step sees of the runner's environment: the few variables a shell needs, nothing of
 * opschain's own. docs/security.md lists them; `--pass-env` adds more by name or `PREFIX_*`.
 */
export const STEP_ENV_INHERITED = ['PATH', 'LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE', 'LC_MESSAGES', 'LC_NUMERIC', 'LC_TIME', 'TZ', 'TMPDIR'] as const;

/** The file a webhook-started run's payload is written to, in each step's work dir ($OPSCHAIN_WEBHOOK_PAYLOAD). */
export const WEBHOOK_PAYLOAD_FILE = 'opschain-webhook-payload';

/** PATH when the runner has none. */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Variables that carry opschain's secrets or locations: never handed to a step, even when asked. */
export function isOpschainSecretName(name: string): boolean {
  return name.startsWith('OPSCHAIN_') || name === 'DATABASE_URL' || name === 'PGPASSWORD' || name === 'PGPASSFILE';
}

export class StepEnvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StepEnvError';
  }
}

const PASS_NAME = /^[A-Za-z_][A-Za-z0-9_]*\*?$/;

/** Checks `--pass-env` values: plain names or `PREFIX_*`; opschain's own variables are refused. */
export function parsePassEnv(values: string[]): string[] {
  const out: string[] = [];
  for (const raw of values.flatMap((v) => v.split(','))) {
    const v = raw.trim();
    if (!v) continue;
    if (!PASS_NAME.test(v)) throw new StepEnvError(`--pass-env ${v}: expected a variable name or a PREFIX_* pattern`);
    if (!v.endsWith('*') && isOpschainSecretName(v)) throw new StepEnvError(`--pass-env ${v}: opschain's own variables (OPSCHAIN_*, DATABASE_URL, PGPASSWORD, PGPASSFILE) are never handed to steps`);
    if (!out.includes(v)) out.push(v);
  }
  return out;
}

/** The unprivileged account steps run as (`--step-user`). */
export interface StepUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** Looks the account up (getent, then /etc/passwd); throws StepEnvError naming what is wrong. */
export function resolveStepUser(name: string, ownUid = process.getuid?.() ?? -1): StepUser {
  if (!/^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(name)) throw new StepEnvError(`--step-user ${name}: not a user name`);
  let line: string | undefined;
  try {
    line = execFileSync('getent', ['passwd', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n')[0];
  } catch {
    try {
      line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.split(':')[0] === name);
    } catch {
      line = undefined;
    }
  }
  const f = line?.split(':');
  if (!f || f.length < 7 || f[0] !== name) throw new StepEnvError(`--step-user ${name}: no such user on this machine`);
  const user = { name, uid: Number(f[2]), gid: Number(f[3]), home: f[5] };
  if (user.uid === 0) throw new StepEnvError(`--step-user ${name}: is root; steps must run as an unprivileged user`);
  if (ownUid !== 0 && ownUid !== user.uid) throw new StepEnvError(`--step-user ${name}: the runner must run as root to start steps as another user (it runs as uid ${ownUid})`);
  return user;
}

/**
 * The whole environment of one step: the inherited few, what `--pass-env` allows, the run's and
 * step's own `env`, and the step's identity. Nothing else of the runner's environment.
 */
export function stepEnvironment(p: { runnerEnv: NodeJS.ProcessEnv; passEnv: string[]; stepUser?: StepUser; offer: Pick<Offer, 'env' | 'run_id' | 'step' | 'attempt' | 'webhook_payload' | 'traceparent'>; dir: string }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of STEP_ENV_INHERITED) if (p.runnerEnv[k] !== undefined) env[k] = p.runnerEnv[k];
  env.PATH ??= DEFAULT_PATH;
  for (const pattern of p.passEnv) {
    const prefix = pattern.endsWith('*') ? pattern.slice(0, -1) : undefined;
    for (const [k, v] of Object.entries(p.runnerEnv)) {
      if (v === undefined || isOpschainSecretName(k)) continue;
      if (prefix !== undefined ? k.startsWith(prefix) : k === pattern) env[k] = v;
    }
  }
  if (p.stepUser) {
    env.HOME = p.stepUser.home;
    env.USER = env.LOGNAME = p.stepUser.name;
  } else {
    if (p.runnerEnv.HOME !== undefined) env.HOME = p.runnerEnv.HOME;
    if (p.runnerEnv.USER !== undefined) env.USER = p.runnerEnv.USER;
    if (p.runnerEnv.LOGNAME !== undefined) env.LOGNAME = p.runnerEnv.LOGNAME;
  }
  env.SHELL = '/bin/sh';
  Object.assign(env, p.offer.env ?? {}, {
    OPSCHAIN_RUN_ID: String(p.offer.run_id),
    OPSCHAIN_STEP: p.offer.step,
    OPSCHAIN_ATTEMPT: String(p.offer.attempt),
    OPSCHAIN_WORK_DIR: p.dir,
  });
  // A run a webhook started: the agent writes its payload to this file before the step starts.
  if (p.offer.webhook_payload !== undefined) env.OPSCHAIN_WEBHOOK_PAYLOAD = join(p.dir, WEBHOOK_PAYLOAD_FILE);
  // The attempt's span (W3C trace context), so the tools the step runs continue the run's trace.
  if (p.offer.traceparent !== undefined) env.TRACEPARENT = p.offer.traceparent;
  return env;
}
