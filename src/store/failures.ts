/**
 * What a store failure means, from the error alone: no pg import, so a CLI verb that goes over
 * HTTP can map errors to exit codes without loading the driver.
 */

// 25006: a write reached a standby (the store's address not yet moved to the promoted primary).
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', '57P01', '57P02', '57P03', '53300', '25006']);

/**
 * True when the store cancelled a statement after its statement_timeout (SQLSTATE 57014). The
 * store answered: what it was asked was too costly as sent (a huge run, a pathological query), so
 * the same request would cost as much again. Never "unavailable", whose verdict invites a retry.
 */
export function isStatementTimeout(err: unknown): boolean {
  return !!err && typeof err === 'object' && (err as { code?: string }).code === '57014';
}

/** What a caller is told for a statement timeout, by the CLI and the API alike. */
export const STATEMENT_TIMEOUT_MESSAGE =
  'the store cancelled a statement of this request after its statement timeout (SQLSTATE 57014): the request is too costly as sent, and retrying it unchanged will not help';

/** True when err means "the store could not be reached or answered in time", as opposed to a logic error. */
export function isStoreUnavailable(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  // The message of a statement timeout says "timeout", which the patterns below would take for an outage.
  if (isStatementTimeout(err)) return false;
  const e = err as { code?: string; message?: string };
  if (e.code && (UNAVAILABLE_CODES.has(e.code) || e.code.startsWith('08'))) return true;
  const msg = e.message ?? '';
  return /timeout|Connection terminated|connection error|Client has encountered a connection error|not queryable|ECONNREFUSED|ECONNRESET/i.test(msg);
}

/** Short description of a store failure for verdicts and readiness. */
export function storeCause(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return (e?.message || e?.code || String(err)).split('\n')[0];
}

