import type { Pool } from '../../store/pool.js';

/** Who is asking and through what: every domain function of the operations layer takes one. */
export interface OpsContext {
  pool: Pool;
  /** Recorded in audit rows and as a run's creator: `alice` from a shell, `token:ci-deploy(tok_…)` over HTTP. */
  actor: string;
  /** Where the call came from: `cli`, or the client address over HTTP. */
  source: string;
  /** The id of the API token an HTTP call presented; absent from a shell with the store's URL. */
  tokenId?: string;
  /** The server's dispatch.accept_exceeding, for verdicts (the CLI's own flag or env otherwise). */
  acceptExceeding?: boolean;
  /** Aborts a long poll when the caller goes away. */
  signal?: AbortSignal;
}
