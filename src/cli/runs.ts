import { userInfo } from 'node:os';
import { Invalid } from '../errors.js';

/** A run id as typed on the command line. */
export function parseRunId(text: string): number {
  if (!/^\d{1,15}$/.test(text.trim()) || Number(text) < 1) throw new Invalid(`expected a run id (a positive number), got ${JSON.stringify(text)}`);
  return Number(text);
}

/** Who pulled a lever from this shell, for audit rows and causes. */
export function cliActor(): string {
  try {
    return userInfo().username || 'cli';
  } catch {
    return 'cli';
  }
}
