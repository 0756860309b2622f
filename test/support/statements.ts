import type { Pool } from '../../src/store/pool.js';

/**
 * Records the text of every statement the pool's clients send while `recording` is on. Call it
 * before the pool opens its first connection: only clients connected afterwards are wrapped.
 */
export function recordStatements(pool: Pool): { statements: string[]; recording: boolean } {
  const rec = { statements: [] as string[], recording: false };
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
      if (rec.recording) rec.statements.push(typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text));
      return query(...args);
    };
  });
  return rec;
}

/** Runs `fn` with `rec` recording, and returns its value with the statements it sent. */
export async function statementsOf<T>(rec: { statements: string[]; recording: boolean }, fn: () => Promise<T>): Promise<{ value: T; statements: string[] }> {
  rec.statements.length = 0;
  rec.recording = true;
  try {
    const value = await fn();
    return { value, statements: [...rec.statements] };
  } finally {
    rec.recording = false;
  }
}
