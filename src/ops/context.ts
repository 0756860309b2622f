import type { Pool } from '../store/pool.js';

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

/** A value as it crosses the wire: dates become ISO strings, undefined fields vanish. */
export type Wire<T> = T extends Date
  ? string
  : T extends (infer U)[]
    ? Wire<U>[]
    : T extends Map<any, any>
      ? Record<string, never>
      : T extends object
        ? { [K in keyof T]: Wire<T[K]> }
        : T;

/** The wire form of a value, so the store transport answers exactly what the HTTP transport does. */
export function wire<T>(value: T): Wire<T> {
  return value === undefined ? (undefined as Wire<T>) : (JSON.parse(JSON.stringify(value)) as Wire<T>);
}
