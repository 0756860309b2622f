import { systemClock } from '../clock.js';
import { leaseByRequest, offerDetails } from '../store/leases.js';
import type { RunnerRow } from '../store/runners.js';
import type { DispatchDeps } from './deps.js';
import { completeLeases, type Completion, type ItemResult } from './lifecycle.js';
import { toOffer, type Offer } from './offers.js';

export interface AcquireRequest {
  runner: RunnerRow;
  requestId: string;
  maxOffers: number;
  waitMs: number;
  onlyRunId: number | null;
  /** The runner says this is the first send of this request id: nothing to replay. */
  fresh?: boolean;
  /** Aborted when the caller goes away. */
  signal?: AbortSignal;
  /** This replica is out of the membership (quiesced): idle the poll for its window and answer it empty. */
  answerIdle?: boolean;
  /** Completions carried by the call: committed first, and the call then waits one dispatch tick at most. */
  completions?: Completion[];
}

export interface AcquireAnswer {
  offers: Offer[];
  /** One result per carried completion, in order; absent when the call carried none. */
  results?: ItemResult[];
  /** Answered empty because a drain, a posture or the replica's quiesce holds the call. */
  held?: boolean;
}

/**
 * The long poll. A retried request id gets the offers it was already handed and the runner has not
 * acked (read from the store, so a retry on another replica, or after a failover, finds them too);
 * an offer is acked only by the runner, so one whose answer never arrived goes back to the queue
 * at its ack deadline (docs/runner-protocol.md). A drained runner
 * idles for the window and is answered empty without ever being matched, unless its drain is
 * lifted meanwhile (it then parks for the rest of the window); otherwise the call parks until a
 * dispatch tick hands it offers, the window ends, or a drain or posture announced meanwhile holds it.
 */
export async function acquire(deps: DispatchDeps, req: AcquireRequest): Promise<Offer[]> {
  return (await acquireCarrying(deps, req)).offers;
}

/**
 * Complete-and-acquire: the completions a call carries commit (through the group commit, so
 * durably) before the call is offered anything by a tick, so the capacity they free is what the
 * next tick sees. Such a call is answered after the first tick that holds it: a runner of short
 * steps then pays one round trip per batch instead of two, and its results never wait out a
 * window on an empty queue.
 *
 * A first send (`fresh`: nothing to replay) of an undrained runner parks before its completions
 * are applied, held from the ticks (`carrying`) but a candidate for the hand-off of the steps
 * they free (dispatch/hand-off.ts): it is about to wait with its slots anyway, so a chain run by
 * one runner gets its next step in the answer to the completion of the last, with no tick between.
 */
export async function acquireCarrying(deps: DispatchDeps, req: AcquireRequest): Promise<AcquireAnswer> {
  const carried = req.completions ?? [];
  if (carried.length === 0) return acquireOffers(deps, { ...req, oneTick: false });
  if (!req.fresh || req.runner.drained || req.answerIdle) {
    const results = await completeLeases(deps, req.runner.id, carried);
    return { ...(await acquireOffers(deps, { ...req, oneTick: true })), results };
  }
  const { acquire: call, offers } = deps.registry.park(
    { runner: req.runner, requestId: req.requestId, slots: req.maxOffers, onlyRunId: req.onlyRunId, oneTick: true, carrying: true, parkedAt: Date.now() },
    req.waitMs,
    req.signal,
  );
  let results: ItemResult[];
  try {
    results = await completeLeases(deps, req.runner.id, carried, call);
  } catch (err) {
    deps.registry.carried(call);
    // A hand-off that failed after sending its delivery answered the call 503 already (its
    // runner retries the request id and finds it); otherwise it is answered by this error.
    offers.catch(() => {});
    call.deliver([]);
    throw err;
  }
  deps.registry.carried(call);
  if (!call.settled) deps.kick();
  const answered = await offers;
  return call.held ? { offers: answered, results, held: true } : { offers: answered, results };
}

async function acquireOffers(deps: DispatchDeps, req: AcquireRequest & { oneTick: boolean }): Promise<AcquireAnswer> {
  const replay = req.fresh ? [] : await leaseByRequest(deps.pool, { runnerId: req.runner.id, requestId: req.requestId });
  if (replay.length > 0) {
    const details = await offerDetails(deps.pool, replay.map((l) => l.stepId));
    return { offers: replay.map((l) => toOffer(l, details.get(l.stepId), deps.ttlMs, deps.defaultStepTimeoutMs, deps.traceSampler)) };
  }
  let waitMs = req.waitMs;
  if (req.answerIdle || (req.runner.drained && req.oneTick)) {
    if (!req.oneTick) await systemClock.sleep(waitMs, req.signal);
    return { offers: [], held: true };
  }
  if (req.runner.drained) {
    // Its drain lifted on any replica (announced at commit), the poll parks for the rest of its window.
    const idleFrom = Date.now();
    if (!(await deps.levers.idleUntilLifted(req.runner.id, waitMs, req.signal))) return { offers: [], held: true };
    waitMs -= Date.now() - idleFrom;
    if (waitMs <= 0) return { offers: [], held: true };
  }
  const { acquire: call, offers } = deps.registry.park(
    { runner: req.runner, requestId: req.requestId, slots: req.maxOffers, onlyRunId: req.onlyRunId, oneTick: req.oneTick, parkedAt: Date.now() },
    waitMs,
    req.signal,
  );
  deps.kick();
  const answered = await offers;
  return call.held ? { offers: answered, held: true } : { offers: answered };
}
