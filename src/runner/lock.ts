import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { processStartTime } from './step-records.js';

export class RunnerLockedError extends Error {
  constructor(readonly file: string, readonly pid: number) {
    super(`this runner is already running as pid ${pid} (lock ${file}); give the second one its own --name`);
    this.name = 'RunnerLockedError';
  }
}

interface LockRecord {
  pid: number;
  startTime: string | null;
}

/**
 * One live process per runner identity: two would share a credential, and the second's start
 * would take the first's running steps for orphans. A lock left by a dead process (the pid is
 * gone, or now belongs to a process started at another time) is taken over.
 */
export function runnerLockAcquire(file: string): () => void {
  let held: LockRecord | undefined;
  try {
    held = JSON.parse(readFileSync(file, 'utf8')) as LockRecord;
  } catch {
    held = undefined;
  }
  if (held && held.pid !== process.pid && held.startTime !== null && processStartTime(held.pid) === held.startTime) {
    throw new RunnerLockedError(file, held.pid);
  }
  const mine: LockRecord = { pid: process.pid, startTime: processStartTime(process.pid) };
  writeFileSync(file, JSON.stringify(mine) + '\n', { mode: 0o600 });
  return () => {
    try {
      const now = JSON.parse(readFileSync(file, 'utf8')) as LockRecord;
      if (now.pid === process.pid) rmSync(file, { force: true });
    } catch {
      // Gone already.
    }
  };
}
