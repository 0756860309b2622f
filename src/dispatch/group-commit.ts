import { CallGroups } from '../core/call-groups.js';
import type { StepOutcome } from '../orchestrator/contract.js';
import { doneByToken, heldKey, leaseAck, leaseComplete, leaseRenew, leaseTableVacuum, type HeldLeaseRef } from '../store/leases.js';
import { withTransaction, type PoolClient } from '../store/pool.js';
import { ChurnVacuum } from './churn-vacuum.js';
import type { FreedHandOff } from './hand-off.js';
import type { DispatchDeps } from './deps.js';
import type { ParkedAcquire } from './waiters.js';
import { emit } from '../events.js';

export interface CompletionRef extends HeldLeaseRef { exitCode: number | null; cause: string | null }

/** One runner call's share of a group: acks, renewals or completions of one runner. */
type Call =
  | { kind: 'ack' | 'renew'; items: HeldLeaseRef[]; resolve: (ok: Set<string>) => void; reject: (err: unknown) => void }
  | { kind: 'complete'; items: CompletionRef[]; carrier?: ParkedAcquire; resolve: (ok: Set<string>) => void; reject: (err: unknown) => void };

/** What a committed group changed, for the caller's signals. */
export interface GroupApplied { ok: Map<Call, Set<string>>; completed: Array<{ runnerId: string; count: number; freed: string[] }>; statuses: Record<'succeeded' | 'failed', number> }

/**
 * Calls that may wait for one group, and groups in flight at once per replica. One: calls that
 * arrive while a group commits wait for it and form the next, larger group, where a second group
 * in flight would pay its own BEGIN, statements and COMMIT for fewer calls (13% fewer statements
 * a step in the wide fleet; docs/performance-history.md).
 */
const MAX_CALLS = 256;
const MAX_IN_FLIGHT = 1;

/**
 * Leases a replica ends between two vacuums of the lease table. A vacuum of the table with this
 * many dead leases took 7–11 ms in the bench's drains; one every 5,000 kept the parked-runner read
 * at 0.2–0.7 ms a call where it had grown to 4.5–5 ms over 100,000 steps (docs/performance-history.md).
 */
export const LEASE_VACUUM_EVERY = 5_000;

/**
 * Applies a set of acks, renewals and completions from any runners in one transaction, with one
 * set-based statement per kind: every item is fenced by its own (step, token, runner), as it
 * would be alone, and the group commits once. Within a group acks go first, then renewals, then
 * completions (calls that were in flight together may be ordered either way). A completion whose
 * lease is gone answers ok only when that runner already completed it with that token.
 */
export async function applyGroup(client: PoolClient, deps: Pick<DispatchDeps, 'ttlMs' | 'hooks' | 'traceLeases'>, calls: Call[], handOff?: FreedHandOff): Promise<GroupApplied> {
  const of = (k: Call['kind']) => calls.filter((c) => c.kind === k);
  const acked = await leaseAck(client, { ttlMs: deps.ttlMs, items: of('ack').flatMap((c) => c.items) });
  const renewed = await leaseRenew(client, { ttlMs: deps.ttlMs, items: of('renew').flatMap((c) => c.items) });
  const completions = of('complete').flatMap((c) => c.items as CompletionRef[]);
  const ended = new Set<string>();
  const completed = new Map<string, { count: number; freed: Set<string> }>();
  const statuses = { succeeded: 0, failed: 0 };
  if (completions.length > 0) {
    const rows = await leaseComplete(client, { items: completions, times: deps.traceLeases });
    // The first completion of a lease in the group is the one recorded, as it would be alone.
    const byKey = new Map<string, CompletionRef>();
    for (const c of completions) if (!byKey.has(heldKey(c))) byKey.set(heldKey(c), c);
    const outcomes: StepOutcome[] = rows.map((lease) => {
      const key = heldKey(lease);
      ended.add(key);
      const mine = completed.get(lease.runnerId) ?? { count: 0, freed: new Set<string>() };
      mine.count += 1;
      // What the end frees for entries set aside on it: a slot of its run, a hold of its pools.
      if (lease.runScope) mine.freed.add(`run:${lease.runId}`);
      for (const p of lease.pools) mine.freed.add(`pool:${p}`);
      completed.set(lease.runnerId, mine);
      const c = byKey.get(key)!;
      return {
        stepId: lease.stepId,
        runId: lease.runId,
        attempt: lease.attempt,
        status: c.exitCode === 0 && !c.cause ? 'succeeded' : 'failed',
        exitCode: c.exitCode,
        cause: c.cause ?? (c.exitCode === 0 ? null : `exited with code ${c.exitCode}`),
        runnerId: lease.runnerId,
        ...(lease.times ? { lease: lease.times } : {}),
      };
    });
    await deps.hooks.stepsFinished(client, outcomes, handOff ? { offerFreed: handOff.offer } : undefined);
    for (const o of outcomes) statuses[o.status === 'succeeded' ? 'succeeded' : 'failed'] += 1;
    for (const k of await doneByToken(client, completions.filter((c) => !ended.has(heldKey(c))))) ended.add(k);
  }
  const ok = new Map<Call, Set<string>>();
  for (const c of calls) ok.set(c, c.kind === 'ack' ? acked : c.kind === 'renew' ? renewed : ended);
  return { ok, completed: [...completed].map(([runnerId, { count, freed }]) => ({ runnerId, count, freed: [...freed] })), statuses };
}

/** What a group commit writes with and signals through: the dispatcher that owns it. */
export type GroupCommitDeps = Pick<DispatchDeps, 'pool' | 'log' | 'ttlMs' | 'hooks' | 'events' | 'kick' | 'leaseVacuumEvery'> & {
  /**
   * A hand-off of the steps a group frees to parked calls, in the group's transaction, the
   * acquire calls that carry the group's completions among them; absent: none.
   */
  handOff?: (carriers: ParkedAcquire[]) => FreedHandOff;
};

/**
 * Group commit of one replica's lease writes (a field of its Dispatcher). A call joins the group that forms while the
 * event loop finishes its turn (or while the group in flight commits); each group is one
 * transaction, and every caller is answered after its commit. A group that fails is re-applied
 * call by call, so one call's failure (a deadlock victim, a store error) is that call's alone.
 */
export class LeaseGroupCommit {
  /** Groups committed and the calls they carried (a group re-applied call by call counts each). */
  readonly stats = { groups: 0, calls: 0 };
  private readonly groups = new CallGroups<Call>({
    maxCalls: MAX_CALLS,
    maxInFlight: MAX_IN_FLIGHT,
    apply: (calls) => this.apply(calls),
    fail: (call, err) => call.reject(err),
  });

  /** Vacuums the lease table as this replica's completions empty it. */
  readonly vacuum: ChurnVacuum;

  constructor(private readonly deps: GroupCommitDeps) {
    this.vacuum = new ChurnVacuum(
      deps.leaseVacuumEvery ?? LEASE_VACUUM_EVERY,
      async () => {
        await leaseTableVacuum(deps.pool);
        emit(deps.events, 'lease:vacuumed', { outcome: 'ok' });
      },
      (err) => {
        emit(deps.events, 'lease:vacuumed', { outcome: 'failed' });
        deps.log.warn({ err: (err as Error).message }, 'lease table vacuum failed; autovacuum remains');
      },
    );
  }

  ack(items: HeldLeaseRef[]): Promise<Set<string>> {
    return this.add('ack', items);
  }

  renew(items: HeldLeaseRef[]): Promise<Set<string>> {
    return this.add('renew', items);
  }

  /** `carrier`: the acquire call carrying these completions (complete-and-acquire), a candidate for what they free. */
  complete(items: CompletionRef[], carrier?: ParkedAcquire): Promise<Set<string>> {
    return this.add('complete', items, carrier);
  }

  private add(kind: Call['kind'], items: HeldLeaseRef[], carrier?: ParkedAcquire): Promise<Set<string>> {
    return new Promise((resolve, reject) => this.groups.push({ kind, items, ...(carrier ? { carrier } : {}), resolve, reject } as Call));
  }

  private async apply(calls: Call[]): Promise<void> {
    const carriers = calls.flatMap((c) => (c.kind === 'complete' && c.carrier ? [c.carrier] : []));
    const handOff = calls.some((c) => c.kind === 'complete') ? this.deps.handOff?.(carriers) : undefined;
    let applied: GroupApplied;
    try {
      applied = await withTransaction(this.deps.pool, (client) => applyGroup(client, this.deps, calls, handOff));
    } catch (err) {
      handOff?.fail(err);
      throw err;
    }
    this.count(calls.length);
    // The offers go out before the completions are answered: the runner that completed may park
    // next, and the hand-off's calls are let go before the kick below wakes a tick.
    if (handOff) {
      await handOff.settle().catch((err) => this.deps.log.warn({ err: (err as Error).message }, 'dispatch: answering the offers of freed steps failed'));
    }
    this.settle(applied);
  }

  private count(calls: number): void {
    this.stats.groups++;
    this.stats.calls += calls;
  }

  private settle(applied: GroupApplied): void {
    for (const [call, ok] of applied.ok) call.resolve(ok);
    for (const c of applied.completed) emit(this.deps.events, 'lease:completed', c);
    if (applied.completed.length > 0) emit(this.deps.events, 'lease:finished', { statuses: applied.statuses });
    if (applied.completed.length > 0) this.deps.kick();
    this.vacuum.deleted(applied.completed.reduce((n, c) => n + c.count, 0));
  }
}

