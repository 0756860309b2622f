/**
 * What this replica's last claim saw of its queue: whether it took every due entry there was for
 * the shards and lanes it claims from, each becoming a lease. While that holds, a tick that only a
 * parking acquire or a completion woke has nothing to claim, so an idle fleet re-polling costs the
 * store no statement at all.
 *
 * It stops holding when the queue may have changed. Work enqueued anywhere announces itself
 * (NOTIFY, or the in-process signal), entries put back here do (`changed`), and another shard set
 * or lane set is another queue (`key`). What nothing announces (a retry's backoff running out, an
 * entry aging into the any-shard lane, entries another replica's tick left in place) is claimed
 * once `validMs` has passed: no later than the busy poll would.
 */
export class QueueSeen {
  private emptyAt: number | null = null;
  private emptyKey = '';
  private changes = 0;

  constructor(
    private readonly now: () => number,
    private readonly validMs: number,
  ) {}

  /** The queue may hold new due entries. */
  changed(): void {
    this.changes++;
    this.emptyAt = null;
  }

  /** Taken before a tick claims: a change after it voids what that tick saw. */
  mark(): number {
    return this.changes;
  }

  /** The tick that took `mark` claimed every due entry of `key`'s queue and leased each one. */
  sawEmpty(mark: number, key: string): void {
    if (mark !== this.changes) return;
    this.emptyAt = this.now();
    this.emptyKey = key;
  }

  /** Whether `key`'s queue is known to hold nothing due now. */
  knownEmpty(key: string): boolean {
    return this.emptyAt !== null && this.emptyKey === key && this.now() - this.emptyAt < this.validMs;
  }
}
