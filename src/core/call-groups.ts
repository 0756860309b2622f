/**
 * Calls gathered into groups: a call joins the group that forms while the event loop finishes
 * its turn, or while the groups in flight are applied; at most `maxInFlight` groups are applied
 * at once, each of at most `maxCalls` calls and, with `weight`, at most `maxWeight` in all (a call
 * heavier than that goes alone). A lone call waits one turn, never a timer.
 *
 * `apply` settles the calls of a group it applied. A group it fails is applied again call by
 * call, so one call's failure (a deadlock victim, a value the store refuses) is that call's
 * alone: `fail` settles a call that failed by itself.
 */
export class CallGroups<C> {
  private waiting: C[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly opts: {
      maxCalls: number;
      maxInFlight: number;
      weight?: (call: C) => number;
      maxWeight?: number;
      apply: (calls: C[]) => Promise<void>;
      fail: (call: C, err: unknown) => void;
    },
  ) {}

  push(call: C): void {
    this.waiting.push(call);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.opts.maxInFlight || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    const calls = this.waiting.splice(0, this.taken());
    if (calls.length === 0) return;
    this.inFlight++;
    try {
      await this.run(calls);
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }

  /** How many of the waiting calls the next group takes. */
  private taken(): number {
    const { weight, maxWeight = Infinity, maxCalls } = this.opts;
    if (!weight) return maxCalls;
    let n = 0;
    let total = 0;
    for (const c of this.waiting) {
      if (n === maxCalls || (n > 0 && total + weight(c) > maxWeight)) break;
      total += weight(c);
      n++;
    }
    return n;
  }

  private async run(calls: C[]): Promise<void> {
    try {
      await this.opts.apply(calls);
    } catch (err) {
      if (calls.length === 1) {
        this.opts.fail(calls[0], err);
        return;
      }
      for (const c of calls) {
        try {
          await this.opts.apply([c]);
        } catch (e) {
          this.opts.fail(c, e);
        }
      }
    }
  }
}
