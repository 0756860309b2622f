/**
 * The domain's errors: what went wrong, in the domain's words. Every layer below the CLI and the
 * HTTP API throws these; `src/cli/errors.ts` maps the kind to an exit code and `src/api/errors.ts`
 * to an HTTP status, each in one place. `code` is the stable machine string of the error body
 * `{"error": {"code", "message"}}`; `details` adds fields beside them (a run file's `problems`).
 */
export type ErrorKind = 'invalid' | 'unauthorized' | 'forbidden' | 'not_found' | 'conflict' | 'unavailable' | 'timed_out' | 'failed';

export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly code: string = kind,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/** Bad input: nothing was written. */
export class Invalid extends DomainError {
  constructor(message: string, code = 'invalid_input', details?: Record<string, unknown>) {
    super('invalid', message, code, details);
  }
}

/** No credential, or one that is unknown, expired or revoked. */
export class Unauthorized extends DomainError {
  constructor(message: string, code = 'unauthorized') {
    super('unauthorized', message, code);
  }
}

/** A valid credential used outside its scope. */
export class Forbidden extends DomainError {
  constructor(message: string, code = 'forbidden') {
    super('forbidden', message, code);
  }
}

export class NotFound extends DomainError {
  constructor(message: string, code = 'not_found') {
    super('not_found', message, code);
  }
}

/** The request contradicts the current state (an ambiguous name, a change racing another). */
export class Conflict extends DomainError {
  constructor(message: string, code = 'conflict') {
    super('conflict', message, code);
  }
}

/** The store or the server could not be reached or answered in time; nothing is known to have changed. */
export class Unavailable extends DomainError {
  constructor(message: string, code = 'unavailable') {
    super('unavailable', message, code);
  }
}

/** Waiting for something (a run, a drain) ran out of time. */
export class TimedOut extends DomainError {
  constructor(message: string, code = 'timed_out') {
    super('timed_out', message, code);
  }
}

/** The thing asked for was done and failed (a run that failed). */
export class Failed extends DomainError {
  constructor(message: string, code = 'failed') {
    super('failed', message, code);
  }
}

export function isDomainError(err: unknown): err is DomainError {
  return err instanceof DomainError;
}

/** The one error body of every API (and of `--json` on the CLI). */
export interface ErrorBody {
  error: { code: string; message: string; [detail: string]: unknown };
}

export function errorBody(err: DomainError): ErrorBody {
  return { error: { ...(err.details ?? {}), code: err.code, message: err.message } };
}
