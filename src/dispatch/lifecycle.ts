import { heldKey, leaseCheck, leaseExpireDue, leaseRequeueUnacked, leaseReturn, pinsForRuns, type LeaseRef, type LeaseRow } from '../store/leases.js';
import { withTransaction } from '../store/pool.js';
import { postureRead } from '../store/posture.js';
import type { DispatchDeps } from './deps.js';
import type { ParkedAcquire } from './waiters.js';
import { emit, type LeaseCall } from '../events.js';

export const FENCED = 'lease expired or revoked';
export const RUNNER_LOST_CAUSE = 'runner lost: lease expired without a result';

export interface ItemResult { step_id: number; ok: boolean; status?: number; error?: string }

/** Counts the fenced answers of one call for the metrics (`lease:fenced`). */
function fenced(deps: Pick<DispatchDeps, 'events'>, call: LeaseCall, n: number): void {
  if (n > 0) emit(deps.events, 'lease:fenced', { call, count: n });
}

function results(deps: Pick<DispatchDeps, 'events'>, call: LeaseCall, items: LeaseRef[], ok: Set<number>): ItemResult[] {
  fenced(deps, call, items.filter((i) => !ok.has(i.stepId)).length);
  return items.map((i) => (ok.has(i.stepId) ? { step_id: i.stepId, ok: true } : { step_id: i.stepId, ok: false, status: 409, error: FENCED }));
}

function heldResults(deps: Pick<DispatchDeps, 'events'>, call: LeaseCall, runnerId: string, items: LeaseRef[], ok: Set<string>): ItemResult[] {
  fenced(deps, call, items.filter((i) => !ok.has(heldKey({ ...i, runnerId }))).length);
  return items.map((i) => (ok.has(heldKey({ ...i, runnerId })) ? { step_id: i.stepId, ok: true } : { step_id: i.stepId, ok: false, status: 409, error: FENCED }));
}

/** Acks, through the replica's group commit: answered once the group it joined has committed. */
export async function ackLeases(deps: DispatchDeps, runnerId: string, items: LeaseRef[]): Promise<ItemResult[]> {
  return heldResults(deps, 'ack', runnerId, items, await deps.groupCommit.ack(items.map((i) => ({ stepId: i.stepId, token: i.token, runnerId }))));
}

/** Renewals (each implies the ack), through the replica's group commit. */
export async function renewLeases(deps: DispatchDeps, runnerId: string, items: LeaseRef[]): Promise<ItemResult[]> {
  return heldResults(deps, 'renew', runnerId, items, await deps.groupCommit.renew(items.map((i) => ({ stepId: i.stepId, token: i.token, runnerId }))));
}

export async function checkLease(deps: DispatchDeps, runnerId: string, ref: LeaseRef): Promise<LeaseRow | undefined> {
  return leaseCheck(deps.pool, { runnerId, stepId: ref.stepId, token: ref.token });
}

export interface Completion extends LeaseRef { exitCode: number | null; cause: string | null }

/**
 * Records completions, each fenced by its own token, with the run's progress, in the group
 * commit's transaction (completions of other runners may share it; each keeps its own verdict).
 * A completion implies the ack: an offer completed before its ack deadline needs no ack. A repeat
 * of a completion already recorded with the same token by the same runner answers ok. `carrier`:
 * the acquire call that carries them, parked already, which the steps they free may be handed to.
 */
export async function completeLeases(deps: DispatchDeps, runnerId: string, items: Completion[], carrier?: ParkedAcquire): Promise<ItemResult[]> {
  const ok = await deps.groupCommit.complete(
    items.map((i) => ({ stepId: i.stepId, token: i.token, runnerId, exitCode: i.exitCode, cause: i.cause })),
    carrier,
  );
  return heldResults(deps, 'complete', runnerId, items, ok);
}

/** A runner gives work back unfinished (graceful shutdown): the next attempt, at the original position. */
export async function releaseLeases(deps: DispatchDeps, runnerId: string, items: Array<LeaseRef & { reason?: string }>): Promise<ItemResult[]> {
  const released = await withTransaction(deps.pool, async (client) => {
    const rows = await leaseReturn(client, { items, runnerId, newAttempt: true });
    const reasons = new Map(items.map((i) => [i.stepId, i.reason]));
    for (const l of rows) {
      await deps.hooks.stepRequeued(client, { stepId: l.stepId, fromAttempt: l.attempt, toAttempt: l.attempt + 1, reason: reasons.get(l.stepId) ?? 'released by the runner', lease: l });
    }
    return new Set(rows.map((r) => r.stepId));
  });
  if (released.size > 0) deps.queueChanged();
  return results(deps, 'release', items, released);
}

/** Leases nothing external saw go back at their original attempt and position. */
export async function handBack(deps: DispatchDeps, leases: Array<Pick<LeaseRow, 'stepId' | 'token'>>, reason: string): Promise<void> {
  await withTransaction(deps.pool, async (client) => {
    const rows = await leaseReturn(client, { items: leases.map((l) => ({ stepId: l.stepId, token: l.token })), newAttempt: false });
    for (const l of rows) await deps.hooks.stepRequeued(client, { stepId: l.stepId, fromAttempt: l.attempt, toAttempt: l.attempt, reason });
  });
  deps.queueChanged();
}

/** `halted`: a platform halt stopped the sweep, which looked at nothing. */
export interface SweepResult { requeued: number; lost: number; returned: number; halted: boolean }

/**
 * One expiry pass: offers never acked by their deadline come back as the next attempt; delivered
 * leases past their TTL fail fast as runner_lost (no auto-retry, log sealed by the orchestrator).
 * Held entirely during a platform halt. Row locks make concurrent sweeps on several replicas safe.
 * Deadlines are judged by the database's now() unless `now` is given (tests set the time).
 */
export async function expireOnce(
  deps: Pick<DispatchDeps, 'pool' | 'hooks' | 'events' | 'queueChanged' | 'log'>,
  opts: { limit?: number; now?: Date } = {},
): Promise<SweepResult> {
  const { limit = 500, now } = opts;
  const posture = await postureRead(deps.pool);
  if (posture.halted) return { requeued: 0, lost: 0, returned: 0, halted: true };
  const out = await withTransaction(deps.pool, async (client) => {
    const unacked = await leaseRequeueUnacked(client, { limit, now });
    for (const l of unacked) {
      await deps.hooks.stepRequeued(client, { stepId: l.stepId, fromAttempt: l.attempt, toAttempt: l.attempt + 1, reason: 'offer not acknowledged by its deadline', lease: l });
    }
    const { lost, returned } = await leaseExpireDue(client, { limit, now });
    const pins = await pinsForRuns(client, [...new Set(lost.filter((l) => l.runScope).map((l) => l.runId))]);
    await deps.hooks.stepsFinished(
      client,
      lost.map((l) => {
        const pinnedLost = l.runScope && pins.get(l.runId) === l.runnerId;
        return {
          stepId: l.stepId,
          runId: l.runId,
          attempt: l.attempt,
          status: 'system_error' as const,
          exitCode: null,
          cause: pinnedLost ? `${RUNNER_LOST_CAUSE} (pinned runner ${l.runnerId} lost)` : RUNNER_LOST_CAUSE,
          runnerId: l.runnerId,
          event: pinnedLost ? 'pinned_runner_lost' : 'runner_lost',
          lease: l,
        };
      }),
    );
    for (const l of returned) await deps.hooks.stepRequeued(client, { stepId: l.stepId, fromAttempt: l.attempt, toAttempt: l.attempt, reason: 'claim expired before delivery' });
    return { requeued: unacked.length, lost: lost.length, returned: returned.length, halted: false };
  });
  if (out.lost > 0) deps.log.warn({ lost: out.lost }, 'leases expired without a result: runner_lost');
  if (out.requeued + out.returned + out.lost > 0) emit(deps.events, 'lease:expired', { requeued: out.requeued, lost: out.lost, returned: out.returned });
  if (out.requeued + out.returned + out.lost > 0) deps.queueChanged();
  return out;
}
