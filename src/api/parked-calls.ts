import type { Clock } from '../clock.js';

/** Parked or held acquires one runner may have at once (the runner agent keeps at most 4): excess is 429. */
export const PARKED_PER_RUNNER = 8;
/** A runner's liveness is written at most once per this interval, however often it polls. */
export const TOUCH_EVERY_MS = 5_000;

/** One long poll in flight: aborted when its caller goes away or the server closes. */
export interface ParkedCall {
  readonly signal: AbortSignal;
  abort(): void;
  /** The call is answered: it no longer holds a place. */
  done(): void;
}

/**
 * The runner protocol's long polls in flight on one replica (acquires and watches, parked or
 * held): how many each runner has, so a runner cannot hold unbounded sockets; every one of them,
 * so a shutdown answers them all empty before HTTP waits for its requests (or it would wait out a
 * poll window); and the runners' liveness, written at most once per TOUCH_EVERY_MS a runner.
 */
export class ParkedCalls {
  private readonly calls = new Set<AbortController>();
  private readonly perRunner = new Map<string, number>();
  private readonly touchedAt = new Map<string, number>();
  private closingNow = false;

  constructor(
    private readonly deps: {
      clock: Pick<Clock, 'now'>;
      /** Writes a runner's liveness (batched by the caller); a failure lets the next call write again. */
      touch: (runnerId: string) => Promise<unknown>;
      maxPerRunner?: number;
      touchEveryMs?: number;
    },
  ) {}

  /** A call of this runner was seen: its liveness is written unless it was within the interval. */
  seen(runnerId: string): void {
    const now = this.deps.clock.now();
    const last = this.touchedAt.get(runnerId);
    if (last !== undefined && now - last < (this.deps.touchEveryMs ?? TOUCH_EVERY_MS)) return;
    this.touchedAt.set(runnerId, now);
    this.deps.touch(runnerId).catch(() => this.touchedAt.delete(runnerId));
  }

  /** An acquire of this runner parks: undefined when the runner already has its most in flight. */
  acquire(runnerId: string): ParkedCall | undefined {
    const n = this.perRunner.get(runnerId) ?? 0;
    if (n >= (this.deps.maxPerRunner ?? PARKED_PER_RUNNER)) return undefined;
    this.perRunner.set(runnerId, n + 1);
    return this.track(() => {
      const left = (this.perRunner.get(runnerId) ?? 1) - 1;
      if (left > 0) this.perRunner.set(runnerId, left);
      else this.perRunner.delete(runnerId);
    });
  }

  /** A watch parks (not counted against the runner's acquires). */
  watch(): ParkedCall {
    return this.track(() => {});
  }

  /** Acquires this runner has in flight. */
  inFlight(runnerId: string): number {
    return this.perRunner.get(runnerId) ?? 0;
  }

  /** Whether the server is closing: answers then also close their connection. */
  get closing(): boolean {
    return this.closingNow;
  }

  /** The server closes: every call in flight is answered now. */
  close(): void {
    this.closingNow = true;
    for (const ctl of this.calls) ctl.abort();
  }

  private track(release: () => void): ParkedCall {
    const ctl = new AbortController();
    this.calls.add(ctl);
    // A call that got past the credential check as the close began parks after it: answered now,
    // or the close would wait out its whole poll window.
    if (this.closingNow) ctl.abort();
    let done = false;
    return {
      signal: ctl.signal,
      abort: () => ctl.abort(),
      done: () => {
        if (done) return;
        done = true;
        this.calls.delete(ctl);
        release();
      },
    };
  }
}
