import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = join(ROOT, 'bin', 'run.js');

export interface CliResult { code: number | null; stdout: string; stderr: string }

/** Runs the built `opschain` binary as a user would. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, opts: { timeoutMs?: number; input?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

/** A long-running CLI process (server, runner) whose output is collected; stop() always ends it. */
export class CliProcess {
  readonly child: ChildProcess;
  output = '';
  private exited: Promise<number | null>;

  constructor(args: string[], env: NodeJS.ProcessEnv = {}) {
    this.child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.on('data', (d) => (this.output += d));
    this.child.stderr!.on('data', (d) => (this.output += d));
    this.exited = new Promise((r) => this.child.on('exit', (code) => r(code)));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async waitForOutput(pattern: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const m = this.output.match(pattern);
      if (m) return m;
      if (!this.running) throw new Error(`process exited (${this.child.exitCode}) before ${pattern}: ${this.output.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`timed out waiting for ${pattern}: ${this.output.slice(-2000)}`);
  }

  /** Sends sig and waits for exit; SIGKILL after the grace period. Returns the exit code. */
  async stop(sig: NodeJS.Signals = 'SIGTERM', graceMs = 15_000): Promise<number | null> {
    if (!this.running) return this.child.exitCode;
    this.child.kill(sig);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  waitExit(): Promise<number | null> {
    return this.exited;
  }
}
