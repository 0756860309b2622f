import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { EventEmitter } from 'node:events';
import type { StepEvent } from './agent.js';

/**
 * One line of a runner's execution history (JSON lines, `--history FILE`): a `start` when a step's
 * process is launched after its ack, a `finish` with how its attempt ended. A runner killed with
 * SIGKILL leaves a start without a finish. Read by `npm run chaos`'s checker.
 */
export interface HistoryRecord {
  ev: 'start' | 'finish';
  runner: string;
  step_id: number;
  run_id: number;
  step: string;
  attempt: number;
  token: string;
  /** Milliseconds since the epoch, this machine's clock. */
  at: number;
  pid?: number;
  /** finish only: completed (the server accepted the result), lost (fenced: 409), released, abandoned. */
  outcome?: StepEvent['outcome'];
  exit_code?: number | null;
}

/**
 * Appends every step start and finish of the agent to `file`, one synchronous write each, so a
 * kill loses at most the line being written.
 */
export function recordHistory(events: EventEmitter, file: string, runnerId: string, now: () => number = Date.now): void {
  mkdirSync(dirname(file), { recursive: true });
  const write = (r: HistoryRecord) => appendFileSync(file, `${JSON.stringify(r)}\n`);
  const base = (e: StepEvent) => ({ runner: runnerId, step_id: e.stepId, run_id: e.runId, step: e.step, attempt: e.attempt, token: e.token, at: now() });
  events.on('step:started', (e: StepEvent) => write({ ev: 'start', ...base(e), pid: e.pid }));
  events.on('step:finished', (e: StepEvent) => write({ ev: 'finish', ...base(e), outcome: e.outcome, exit_code: e.result?.exitCode ?? null }));
}
