/** An error the user can fix: bad input, unknown id. Exit code 2, one line, nothing written. */
export class UserError extends Error {
  constructor(message: string, readonly code = 'invalid_input', readonly exitCode = 2) {
    super(message);
    this.name = 'UserError';
  }
}

export class NotFoundError extends UserError {
  constructor(message: string) {
    super(message, 'not_found', 2);
  }
}
