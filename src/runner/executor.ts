import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { formatDuration } from '../core/duration.js';

export interface ExecRequest {
  command: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Null or undefined: no limit. */
  timeoutMs?: number | null;
  /** Between SIGTERM and SIGKILL of the process group. */
  killGraceMs?: number;
  onOutput: (stream: 'stdout' | 'stderr', text: string) => void;
  /** Run as this account instead of the runner's (`--step-user`); the runner must be root. */
  user?: { uid: number; gid: number };
}

export interface ExecResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** Set when the step did not end by itself: timeout, kill, or a spawn failure. */
  cause: string | null;
}

export interface Execution {
  readonly pid: number | undefined;
  readonly done: Promise<ExecResult>;
  /** Ends the whole process group: SIGTERM, then SIGKILL after the grace. Idempotent. */
  kill(cause: string): void;
}

/** How long output may keep arriving after the shell exited before its pipes are cut. */
const DRAIN_AFTER_EXIT_MS = 2_000;

function signalGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, sig);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/**
 * The variable that marks every process of one step. A process that leaves the step's process
 * group (`setsid`, a double fork) keeps its environment, so the runner still finds it in /proc
 * and ends it with the step (the cookie Jenkins' ProcessTreeKiller uses). A process that clears
 * its own environment escapes this; docs/security.md says so.
 */
export const STEP_COOKIE_VAR = 'OPSCHAIN_STEP_COOKIE';

/**
 * Pids whose environment holds `cookie` (Linux /proc; none elsewhere or when unreadable). With
 * `after` (the step's shell), only processes with a higher pid are read — every process the step
 * started was created after its shell — unless pids have wrapped around since, then all.
 */
export function pidsWithCookie(cookie: string, after = 0): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const needle = Buffer.from(`${STEP_COOKIE_VAR}=${cookie}\0`);
  const pids = entries.filter((e) => /^[0-9]+$/.test(e)).map(Number);
  const wrapped = after > 0 && lastPid() < after;
  const out: number[] = [];
  for (const e of pids) {
    if (e === process.pid || (after > 0 && !wrapped && e <= after)) continue;
    try {
      if (readFileSync(`/proc/${e}/environ`).includes(needle)) out.push(Number(e));
    } catch {
      // Gone, or not ours to read.
    }
  }
  return out;
}

/** The pid the kernel handed out last (/proc/loadavg); 0 when unknown, which reads as wrapped. */
function lastPid(): number {
  try {
    return Number(readFileSync('/proc/loadavg', 'utf8').trim().split(' ')[4]) || 0;
  } catch {
    return 0;
  }
}

function signalCookie(cookie: string, sig: NodeJS.Signals, after?: number): void {
  for (const pid of pidsWithCookie(cookie, after)) {
    try {
      process.kill(pid, sig);
    } catch {
      // Gone meanwhile.
    }
  }
}

/**
 * Runs a command with `/bin/sh -c` as the leader of its own process group, so a timeout, a
 * cancel or a fenced lease can end everything it started (pipelines, background jobs), not
 * just the shell.
 */
export function execute(req: ExecRequest): Execution {
  const killGraceMs = req.killGraceMs ?? 5_000;
  let killCause: string | null = null;
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  let timeoutTimer: NodeJS.Timeout | undefined;

  const cookie = randomBytes(12).toString('hex');
  const child = spawn('/bin/sh', ['-c', req.command], {
    cwd: req.cwd,
    env: { ...req.env, [STEP_COOKIE_VAR]: cookie },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(req.user ? { uid: req.user.uid, gid: req.user.gid } : {}),
  });
  const pid = child.pid;

  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  for (const stream of ['stdout', 'stderr'] as const) {
    child[stream].on('data', (buf: Buffer) => {
      const text = decoders[stream].write(buf);
      if (text) req.onOutput(stream, text);
    });
  }

  const kill = (cause: string) => {
    if (killCause !== null) return;
    killCause = cause;
    signalGroup(pid, 'SIGTERM');
    signalCookie(cookie, 'SIGTERM', pid);
    killTimer = setTimeout(() => {
      signalGroup(pid, 'SIGKILL');
      signalCookie(cookie, 'SIGKILL', pid);
    }, killGraceMs);
  };

  if (req.timeoutMs && req.timeoutMs > 0) {
    timeoutTimer = setTimeout(() => {
      timedOut = true;
      kill(`timed out after ${formatDuration(req.timeoutMs!)}`);
    }, req.timeoutMs);
  }

  const done = new Promise<ExecResult>((resolve) => {
    let spawnError: Error | undefined;
    child.on('error', (err) => {
      spawnError = err;
      // No process means no 'close' to wait for.
      if (!child.pid) {
        clearTimeout(timeoutTimer);
        resolve({ exitCode: null, signal: null, timedOut: false, cause: `could not start /bin/sh: ${err.message}` });
      }
    });
    child.on('exit', () => {
      // Whatever the shell left behind in its group (background jobs), or in a session of its
      // own, ends with it; their output already in the pipes is still read.
      signalGroup(pid, 'SIGKILL');
      signalCookie(cookie, 'SIGKILL', pid);
      const cut = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, DRAIN_AFTER_EXIT_MS);
      cut.unref();
    });
    child.on('close', (code, signal) => {
      clearTimeout(timeoutTimer);
      clearTimeout(killTimer);
      for (const stream of ['stdout', 'stderr'] as const) {
        const rest = decoders[stream].end();
        if (rest) req.onOutput(stream, rest);
      }
      if (spawnError) {
        resolve({ exitCode: null, signal: null, timedOut: false, cause: `could not start /bin/sh: ${spawnError.message}` });
        return;
      }
      const cause = killCause ?? (signal ? `killed by ${signal}` : null);
      resolve({ exitCode: killCause ? null : code, signal, timedOut, cause });
    });
  });

  return { pid, done, kill };
}
