import { stepTraceParent, type Sampler } from '../core/trace-ids.js';
import type { LeaseRow, OfferDetail } from '../store/leases.js';

/** One offer as the runner protocol carries it (docs/runner-protocol.md). */
export interface Offer {
  step_id: number;
  run_id: number;
  attempt: number;
  token: string;
  step: string;
  command: string;
  env: Record<string, string>;
  timeout_ms: number | null;
  lease_ttl_ms: number;
  ack_deadline_ms: number;
  renew_interval_ms: number;
  max_parallel_steps: number;
  run_scope: boolean;
  /**
   * Sent true by servers that delivered offers acked (ack_on_delivery, withdrawn): the runner then
   * made no ack call. Never sent now: every offer waits for the runner's ack.
   */
  acked?: boolean;
  /** The W3C traceparent the step runs under (its attempt's span); the runner sets TRACEPARENT to it. */
  traceparent?: string;
  /** Runs a webhook started: its payload, which the runner writes to the file OPSCHAIN_WEBHOOK_PAYLOAD names. */
  webhook_payload?: string;
}

export const RENEW_INTERVAL_MS = 60_000;

/** The ack deadline always falls well inside the lease TTL, so an un-acked offer is re-queued before it could expire. */
export function ackDeadlineMs(ttlMs: number): number {
  return Math.max(1_000, Math.min(30_000, Math.floor(ttlMs / 3)));
}

export function renewIntervalMs(ttlMs: number): number {
  return Math.max(500, Math.min(RENEW_INTERVAL_MS, Math.floor(ttlMs / 3)));
}

/**
 * The offer of a delivered lease; a step with no timeout of its own gets `defaultTimeoutMs`
 * (steps.default_timeout). `traceSampler` is set when this replica exports traces.
 */
export function toOffer(
  lease: Pick<LeaseRow, 'stepId' | 'runId' | 'attempt' | 'token' | 'maxParallel' | 'runScope'>,
  detail: OfferDetail | undefined,
  ttlMs: number,
  defaultTimeoutMs?: number,
  traceSampler?: Sampler,
): Offer {
  const traceparent = detail ? stepTraceParent({ id: lease.runId, ...detail.trace }, lease.stepId, lease.attempt, traceSampler) : undefined;
  return {
    step_id: lease.stepId,
    run_id: lease.runId,
    attempt: lease.attempt,
    token: lease.token,
    step: detail?.step ?? String(lease.stepId),
    command: detail?.command ?? '',
    env: detail?.env ?? {},
    timeout_ms: detail?.timeoutMs ?? defaultTimeoutMs ?? null,
    lease_ttl_ms: ttlMs,
    ack_deadline_ms: ackDeadlineMs(ttlMs),
    renew_interval_ms: renewIntervalMs(ttlMs),
    max_parallel_steps: detail?.maxParallelSteps ?? lease.maxParallel,
    run_scope: lease.runScope,
    ...(detail?.webhookPayload != null ? { webhook_payload: detail.webhookPayload } : {}),
    ...(traceparent ? { traceparent } : {}),
  };
}
