/**
 * Vacuums a table after every `every` rows this replica deleted from it, one vacuum at a time.
 *
 * The lease table holds only live leases, yet every delivery inserts a row and every completion
 * deletes it. Until a vacuum, each deleted lease leaves its heap tuple and its index entries
 * behind, and freed space is not reused, so the table grows with every step ever leased. The
 * tick's read of its parked runners' running load reaches their leases through the runner index
 * as a bitmap scan, which visits every dead entry and never marks one dead: in a sustained drain
 * it grew from about 1.3 to 4.5 ms a call. Autovacuum wakes at most once a naptime (a minute by
 * default), when thousands of steps a second have long since bloated the table; counting the
 * deletes where they happen keeps it small however fast the steps go.
 */
export class ChurnVacuum {
  private pending = 0;
  private running: Promise<void> | null = null;
  /** Vacuums started and failed (a failure is logged and the count starts again). */
  readonly stats = { runs: 0, failures: 0 };

  constructor(
    private readonly every: number,
    private readonly vacuum: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** `n` more rows were deleted; starts a vacuum when enough have been and none is running. */
  deleted(n: number): void {
    if (this.every <= 0) return;
    this.pending += n;
    if (this.pending < this.every || this.running) return;
    this.pending = 0;
    this.stats.runs++;
    this.running = this.vacuum()
      .catch((err) => {
        this.stats.failures++;
        this.onError(err);
      })
      .finally(() => (this.running = null));
  }

  /** Settles when the vacuum in flight, if any, has (the pool's end waits for its connection anyway). */
  async idle(): Promise<void> {
    await this.running;
  }
}
