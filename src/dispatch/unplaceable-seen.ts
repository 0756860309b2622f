import type { ReturnCode } from '../core/plan.js';
import type { ParkedAcquire } from './waiters.js';

/** Returns no parked call can end, whoever parks: a pool's holders or a run's steps out must change. */
const RUNNER_FREE: ReadonlySet<ReturnCode> = new Set<ReturnCode>(['pool_full', 'run_at_cap']);
/** Returns only a call of a runner placed unlike every one considered can end. */
const BY_PLACEMENT: ReadonlySet<ReturnCode> = new Set<ReturnCode>(['no_waiter_matches']);
// Any other return (slots taken, busy by load, a pinned runner not parked, waiting for the most
// capable runner to be idle) may be ended by any call that parks: each is planned over.

/** A call's placement as the planner matches it: its runner's group, labels and executors, and the run it is limited to. */
export interface CallPlacement {
  group: string | null;
  labels: readonly string[];
  executors: readonly string[];
  onlyRunId: number | null;
}

export const placementKey = (c: CallPlacement): string => JSON.stringify([c.group, [...c.labels].sort(), [...c.executors].sort(), c.onlyRunId]);

/** What a tick that claimed entries and placed none saw: the entries, why each stayed, and the calls it planned them over. */
export interface UnplacedSighting {
  stepIds: number[];
  codes: ReturnCode[];
  /** placementKey of every open call it planned over whose runner takes any run's work. */
  placements: string[];
}

/**
 * What this replica's last tick found when every entry it claimed stayed unplaced (none set
 * aside, none delivered): the same claim over the same parked calls would find the same, so
 * runners parking (each kicks a pass) and re-polling cost no claim and no read of every parked
 * runner until something that could place one of those entries happens:
 *
 *  - the queue changed (work enqueued here or announced by NOTIFY, entries put back), or a lease
 *    ended here (a run's step done, a runner's load freed), or a pool was released, a drain or a
 *    posture lifted on any replica (announced on the queue channel): `changed`;
 *  - a call parked that the verdicts say could take one: for "no parked runner matches", a call
 *    placed unlike every one considered; for capacity, a pinned runner or an exceeding step, any
 *    call; for a full pool or a run at its cap, none. Such calls are planned over alone (`matters`),
 *    reading only their runners;
 *  - another shard or lane set (`key`);
 *  - the sighting's validity ran out: from `minMs`, doubling with each sighting no change came
 *    between, up to `maxMs`. What nothing announces (a retry's backoff, a drain lifted while the
 *    listener was away) is seen then. A sighting that capacity may end stays at `minMs`: a runner
 *    parked here may free its load by completing on another replica.
 */
export class UnplaceableSeen {
  private at: number | null = null;
  private key = '';
  private validMs: number;
  /** The validity the next sighting gets: doubles while no change comes between sightings. */
  private nextValidMs: number;
  private changes = 0;
  private readonly stepIds = new Set<number>();
  private readonly placements = new Set<string>();
  /** Some entry may be placed by any call that parks. */
  private anyCall = false;
  /** Some entry may be placed by a call placed unlike those considered. */
  private byPlacement = false;

  constructor(
    private readonly now: () => number,
    private readonly minMs: number,
    private readonly maxMs: number,
  ) {
    this.validMs = minMs;
    this.nextValidMs = minMs;
  }

  /** Something that could place one of the entries happened. */
  changed(): void {
    this.changes++;
    this.at = null;
    this.nextValidMs = this.minMs;
  }

  /** Taken before a tick claims: a change after it voids what that tick saw. */
  mark(): number {
    return this.changes;
  }

  /** Whether the sighting for `key`'s queue still holds. */
  holds(key: string): boolean {
    return this.at !== null && this.key === key && this.now() - this.at < this.validMs;
  }

  /** How long the sighting still holds, or null when there is none: the loop claims again no later. */
  msLeft(): number | null {
    return this.at === null ? null : Math.max(0, this.validMs - (this.now() - this.at));
  }

  /** Whether this call, parked since the sighting, could take one of its entries. */
  matters(call: ParkedAcquire): boolean {
    if (this.anyCall) return true;
    return this.byPlacement && !this.placements.has(placementKey({ ...call.runner, onlyRunId: call.onlyRunId }));
  }

  /** The tick that took `mark` over every parked call claimed these entries and placed none. */
  saw(mark: number, key: string, s: UnplacedSighting): void {
    if (mark !== this.changes) return;
    this.stepIds.clear();
    this.placements.clear();
    this.anyCall = false;
    this.byPlacement = false;
    this.validMs = this.nextValidMs;
    this.nextValidMs = Math.min(this.maxMs, this.nextValidMs * 2);
    this.at = this.now();
    this.key = key;
    this.add(s);
    // Capacity may be freed where nothing here hears of it (a runner parked here completing on
    // another replica): such a sighting is claimed again at the busy cadence, never backed off.
    if (this.anyCall) this.validMs = this.nextValidMs = this.minMs;
  }

  /**
   * A tick over calls that parked since (those that `matters`) placed nothing either, and met only
   * entries the sighting holds: they are considered too. Otherwise the sighting is dropped.
   */
  extend(mark: number, s: UnplacedSighting | null): void {
    if (mark !== this.changes || this.at === null) return;
    if (s === null || s.stepIds.some((id) => !this.stepIds.has(id))) {
      this.at = null;
      return;
    }
    this.add(s);
  }

  /** The sighting no longer holds (a tick over new calls delivered, set aside or failed). */
  forget(): void {
    this.at = null;
  }

  private add(s: UnplacedSighting): void {
    for (const id of s.stepIds) this.stepIds.add(id);
    for (const p of s.placements) this.placements.add(p);
    for (const code of s.codes) {
      if (RUNNER_FREE.has(code)) continue;
      if (BY_PLACEMENT.has(code)) this.byPlacement = true;
      else this.anyCall = true;
    }
  }
}
