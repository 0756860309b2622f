import { ConfigError, redactUrl } from '../config-errors.js';
import { DomainError, Failed, Invalid, Unavailable, type ErrorKind } from '../errors.js';
import { isStatementTimeout, isStoreUnavailable, STATEMENT_TIMEOUT_MESSAGE, storeCause } from '../store/failures.js';

/** The exit codes of every verb (docs/cli.md). */
export const EXIT = { done: 0, failed: 1, usage: 2, notFound: 3, conflict: 4, unavailable: 5, timedOut: 6, refused: 7 } as const;

/** Domain error kind → exit code: the one place the CLI decides it. */
export const EXIT_CODES: Record<ErrorKind, number> = {
  failed: EXIT.failed,
  invalid: EXIT.usage,
  // Not a usage error: the command was right, the credential is not (401) or too small (403).
  unauthorized: EXIT.refused,
  forbidden: EXIT.refused,
  not_found: EXIT.notFound,
  conflict: EXIT.conflict,
  unavailable: EXIT.unavailable,
  timed_out: EXIT.timedOut,
};

/**
 * Any error a verb can end with, as a domain error: config mistakes are bad input, a store that
 * cannot be reached is Unavailable naming where its URL came from and how to start one, a statement
 * the store cancelled after its statement timeout is Failed (exit 1: the store is there, the
 * request was too costly).
 */
export function asDomainError(err: unknown, store?: { url: string; from: string }): DomainError | undefined {
  if (err instanceof DomainError) return err;
  if (err instanceof ConfigError) return new Invalid(err.message, 'invalid_config');
  if (isStatementTimeout(err)) return new Failed(STATEMENT_TIMEOUT_MESSAGE, 'statement_timeout');
  if (isStoreUnavailable(err)) {
    const where = store ? ` at ${redactUrl(store.url)} (from ${store.from})` : '';
    const hint = store?.from.includes('OPSCHAIN_HOME') ? "; start it with 'opschain server start'" : '; check that PostgreSQL is running and the URL is right';
    return new Unavailable(`store unavailable${where}: ${storeCause(err)}${hint}`, 'store_unavailable');
  }
  return undefined;
}

/** @deprecated throw `Invalid` / `NotFound` from src/errors.ts; kept so older call sites still read. */
export { Invalid as UserError, NotFound as NotFoundError } from '../errors.js';
