import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What a runner remembers of a running step, so its next incarnation can end it if this one dies. */
export interface StepRecord {
  stepId: number;
  runId: number;
  step: string;
  /** The process group leader (the step's /bin/sh). */
  pid: number;
  /** The leader's start time (Linux /proc), so a recycled pid is never taken for the step. */
  startTime: string | null;
  dir: string;
}

export interface Logged {
  warn(obj: object, msg: string): void;
}

/** `/proc/<pid>/stat` field 22: start time in clock ticks since boot; null off Linux or when gone. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

/**
 * One small file per running step beside the runner's identity. A runner killed with SIGKILL
 * cannot end its steps' process groups; when it starts again it ends whatever is still running
 * from the records it finds, so a step the server already failed as runner_lost does not go on
 * with side effects nobody will account for.
 */
export class StepRecords {
  constructor(readonly dir: string) {}

  write(rec: StepRecord): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    writeFileSync(join(this.dir, `${rec.stepId}.json`), JSON.stringify(rec) + '\n', { mode: 0o600 });
  }

  remove(stepId: number): void {
    rmSync(join(this.dir, `${stepId}.json`), { force: true });
  }

  /** Ends the process groups of steps a previous incarnation left running; returns the records it ended. */
  reapOrphans(log: Logged): StepRecord[] {
    if (!existsSync(this.dir)) return [];
    const reaped: StepRecord[] = [];
    for (const file of readdirSync(this.dir)) {
      if (!file.endsWith('.json')) continue;
      const path = join(this.dir, file);
      let rec: StepRecord | undefined;
      try {
        rec = JSON.parse(readFileSync(path, 'utf8')) as StepRecord;
      } catch {
        rec = undefined;
      }
      if (rec && rec.pid > 0 && rec.startTime !== null && processStartTime(rec.pid) === rec.startTime) {
        try {
          process.kill(-rec.pid, 'SIGKILL');
          reaped.push(rec);
          log.warn({ run_id: rec.runId, step: rec.step, step_id: rec.stepId, pid: rec.pid }, `ended step ${rec.step} of run ${rec.runId} (pid ${rec.pid}), left running by a previous run of this runner`);
        } catch {
          // Already gone.
        }
      }
      if (rec?.dir) rmSync(rec.dir, { recursive: true, force: true });
      rmSync(path, { force: true });
    }
    return reaped;
  }
}
