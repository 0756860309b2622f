import type { Logger } from '../logger.js';

/**
 * Work only the leader does, once across the replicas: runner liveness, reaping replica rows,
 * retention of every kind, lifting postures past their --until, the lost-runner expiry sweep,
 * trigger housekeeping. Every such duty runs on the leader's coordination tick through one
 * LeaderDuties; none keeps a timer or a leadership check of its own.
 */
export interface LeaderDuty<T = unknown> {
  /** For the log: `coordination: <name> failed; …`. */
  name: string;
  /**
   * Absent: every leader tick. Otherwise at most once per `everyMs` of the local clock, the first
   * time one interval after this replica became leader (a fresh leader has other work first).
   */
  everyMs?: number;
  /** After a failure, the wait before the next try; absent: the next tick its cadence allows. */
  retryMs?: number;
  /** What the duty returns when it failed (it is logged and skipped; the tick goes on). */
  fallback: T;
  run(p: { leaderToken: number }): Promise<T>;
}

/** What each duty of one leader tick returned (its fallback when it failed; absent when not due). */
export class DutyResults {
  constructor(private readonly by: Map<LeaderDuty<unknown>, unknown>) {}

  of<T>(duty: LeaderDuty<T>): T {
    return (this.by.has(duty) ? this.by.get(duty) : duty.fallback) as T;
  }

  /** Duties that ran this tick, by name, in order. */
  names(): string[] {
    return [...this.by.keys()].map((d) => d.name);
  }
}

/**
 * The duties of one replica's leadership, in order, with their cadence. A failing duty is logged
 * and skipped: it must not stop the heartbeat and leases, nor the duties after it.
 */
export class LeaderDuties {
  private readonly nextAt = new Map<LeaderDuty<unknown>, number>();
  private leading = false;

  constructor(
    private readonly duties: ReadonlyArray<LeaderDuty<unknown>>,
    private readonly log: Logger,
  ) {}

  /**
   * One coordination tick: on the leader (`leaderToken` defined), every duty that is due, in
   * order; on any other replica nothing, and the cadences start over for its next leadership.
   */
  async tick(p: { leaderToken: number | undefined; now: number }): Promise<DutyResults> {
    const ran = new Map<LeaderDuty<unknown>, unknown>();
    if (p.leaderToken === undefined) {
      this.leading = false;
      this.nextAt.clear();
      return new DutyResults(ran);
    }
    if (!this.leading) {
      this.leading = true;
      for (const d of this.duties) if (d.everyMs !== undefined) this.nextAt.set(d, p.now + d.everyMs);
    }
    for (const duty of this.duties) {
      const due = this.nextAt.get(duty);
      if (due !== undefined && p.now < due) continue;
      try {
        ran.set(duty, await duty.run({ leaderToken: p.leaderToken }));
        if (duty.everyMs !== undefined) this.nextAt.set(duty, p.now + duty.everyMs);
      } catch (err) {
        ran.set(duty, duty.fallback);
        this.log.warn({ err: (err as Error).message }, `coordination: ${duty.name} failed; retrying ${duty.retryMs ? `in ${duty.retryMs / 1000} s` : 'next tick'}`);
        if (duty.retryMs !== undefined) this.nextAt.set(duty, p.now + duty.retryMs);
      }
    }
    return new DutyResults(ran);
  }
}
