/** Wire shapes of the runner protocol (docs/runner-protocol.md), as the runner sees them. */
import type { ItemResult } from '../dispatch/lifecycle.js';

export const PROTOCOL_VERSION = 1;

/** The exact verdict strings a runner switches on. */
export const LEASE_LOST = 'lease expired or revoked';
export const CREDENTIAL_INVALID = 'credential invalid';

export interface RegisterRequest {
  registration_token: string;
  name: string;
  group?: string;
  labels?: string[];
  executors?: string[];
  max_load?: number;
  max_parallel_steps?: number;
  site?: string;
  protocol_version?: number;
}

export interface Registration {
  runner_id: string;
  credential: string;
  lease_ttl_ms: number;
  poll_window_ms: number;
}

export interface AcquireRequest {
  request_id: string;
  max_offers?: number;
  wait_ms?: number;
  only_run_id?: number | null;
  /** Accepted and ignored by servers since offers wait for the runner's ack; the agent no longer sends it. */
  ack_on_delivery?: boolean;
  /** First send of this request id (the client drops it on retries): the server skips its replay lookup. */
  fresh?: boolean;
  /**
   * Complete-and-acquire: completions committed before the call parks; the call is then answered
   * after one dispatch tick, with `results` in order. A server that predates it answers 400.
   */
  completions?: Completion[];
}

/** The acquire's answer and each item's verdict: the server's own definitions. */
export type { AcquireAnswer } from '../dispatch/acquire.js';
export type { ItemResult } from '../dispatch/lifecycle.js';

/** One offer on the wire: the server's own definition, so the two sides cannot drift apart. */
export type { Offer } from '../dispatch/offers.js';

export interface LeaseRef {
  step_id: number;
  token: string;
}

export interface ReleaseItem extends LeaseRef {
  reason?: string;
}

export interface Completion extends LeaseRef {
  exit_code: number | null;
  cause?: string;
}

export interface LogChunk {
  stream: 'stdout' | 'stderr';
  text: string;
}

/** A lease is fenced: the item's result says so exactly. */
export function isLeaseLost(r: ItemResult): boolean {
  return !r.ok && (r.status === 409 || r.error === LEASE_LOST);
}
