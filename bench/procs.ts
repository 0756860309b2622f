import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, from bench/ (tsx) or dist/bench/ (built). */
export const ROOT = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  return here.endsWith(join('dist', 'bench')) ? join(here, '..', '..') : join(here, '..');
})();
export const BIN = join(ROOT, 'bin', 'run.js');

type Cleanup = () => Promise<void>;
const cleanups: Cleanup[] = [];
const children = new Set<ChildProcess>();

/** Registers a stop action; the harness runs them all, newest first, on exit, error or Ctrl-C. */
export function onCleanup(fn: Cleanup): () => void {
  cleanups.push(fn);
  return () => {
    const i = cleanups.indexOf(fn);
    if (i >= 0) cleanups.splice(i, 1);
  };
}

export async function runCleanups(): Promise<void> {
  while (cleanups.length) {
    const fn = cleanups.pop()!;
    await fn().catch(() => {});
  }
}

// A harness that dies without running its cleanups still must not leave servers behind.
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** One `opschain server start` child process. */
export class ServerProcess {
  readonly child: ChildProcess;
  url = '';
  output = '';
  private readonly exited: Promise<number | null>;
  private readonly unregister: () => void;

  constructor(opts: { databaseUrl: string; home: string; cpuProfDir?: string; env?: NodeJS.ProcessEnv; name?: string }) {
    const nodeArgs = opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`, `--cpu-prof-name=${opts.name ?? 'server'}-${Date.now()}.cpuprofile`] : [];
    this.child = spawn(process.execPath, [...nodeArgs, BIN, 'server', 'start', '--database-url', opts.databaseUrl, '--port', '0', '--log-level', 'warn', '--home', opts.home], {
      env: { ...process.env, NO_COLOR: '1', OCLIF_SKIP_UPDATE_CHECK: '1', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(this.child);
    const keep = (d: Buffer) => {
      this.output += d.toString();
      if (this.output.length > 200_000) this.output = this.output.slice(-100_000);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.exited = new Promise((r) =>
      this.child.on('exit', (code) => {
        children.delete(this.child);
        r(code);
      }),
    );
    this.unregister = onCleanup(() => this.stop().then(() => {}));
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Waits until the replica has recorded its HTTP address, and learns it. */
  async ready(readAddress: () => Promise<string | undefined>, timeoutMs = 60_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!this.running) throw new Error(`opschain server exited (${this.child.exitCode}) before it was ready: ${this.output.slice(-2000)}`);
      const url = await readAddress().catch(() => undefined);
      if (url) {
        this.url = url;
        return url;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`opschain server not ready within ${timeoutMs} ms: ${this.output.slice(-2000)}`);
  }

  /** Error-level log lines the server printed (pino JSON level ≥ 50, or anything not JSON). */
  errorLines(): string[] {
    return this.output
      .split('\n')
      .filter((l) => l.trim())
      .filter((l) => {
        try {
          return (JSON.parse(l).level ?? 0) >= 50;
        } catch {
          return !/update available|^\s*$/.test(l);
        }
      });
  }

  /** CPU time (ms) the server process has used so far (user + system), from /proc (Linux). */
  cpuMs(): number | null {
    try {
      const text = readFileSync(`/proc/${this.pid}/stat`, 'utf8');
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      return (Number(f[11]) + Number(f[12])) * 10; // USER_HZ is 100
    } catch {
      return null;
    }
  }

  /** Resident set size and its high-water mark, in bytes, from /proc (Linux). */
  memory(): { rss: number; hwm: number } | undefined {
    try {
      const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
      const kb = (key: string) => Number(status.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN) * 1024;
      return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
    } catch {
      return undefined;
    }
  }

  async stop(graceMs = 15_000): Promise<number | null> {
    this.unregister();
    if (!this.running) return this.child.exitCode;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}

/** A loopback port free at the moment of asking (for a server that must be told its port). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const addr = srv.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}
