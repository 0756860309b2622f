/** Registrations one replica serves at once: each holds a store connection for its transaction. */
export const REGISTRATIONS_IN_FLIGHT = 8;
/** Registrations that wait in memory for a permit; one more is refused. */
export const REGISTRATIONS_WAITING = 64;
/** What a refused registration is told to wait (Retry-After, seconds); the runner adds its own jitter. */
export const REGISTRATION_RETRY_AFTER_S = 1;

/**
 * A small semaphore in front of registration: a fleet registering at once (10,000 machines
 * booted together, a replica restarted behind a load balancer) must neither take every store
 * connection from the dispatch plane nor queue unboundedly in memory. A burst waits for one of
 * the permits in a short queue; beyond it the answer is 429 with Retry-After at once, before the
 * registration token is even read, so a refusal costs no store work.
 */
export class RegistrationGate {
  private inFlight = 0;
  private readonly waiting: Array<(release: (() => void) | undefined) => void> = [];

  constructor(readonly permits = REGISTRATIONS_IN_FLIGHT, readonly maxWaiting = REGISTRATIONS_WAITING) {}

  /**
   * A permit (release it by calling the function it resolves to; twice is harmless), at once or
   * when one is handed on; undefined at once when the queue is full. A caller that goes away
   * (signal) while waiting leaves the queue and resolves undefined.
   */
  enter(signal?: AbortSignal): Promise<(() => void) | undefined> | undefined {
    if (this.inFlight < this.permits) {
      this.inFlight++;
      return Promise.resolve(this.permit());
    }
    if (this.waiting.length >= this.maxWaiting) return undefined;
    return new Promise((resolve) => {
      const take = (release: (() => void) | undefined) => {
        signal?.removeEventListener('abort', leave);
        resolve(release);
      };
      const leave = () => {
        const i = this.waiting.indexOf(take);
        if (i >= 0) this.waiting.splice(i, 1);
        resolve(undefined);
      };
      if (signal?.aborted) return resolve(undefined);
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(take);
    });
  }

  /** Registrations being served, and waiting. */
  get load(): { inFlight: number; waiting: number } {
    return { inFlight: this.inFlight, waiting: this.waiting.length };
  }

  private permit(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // Handed straight to the next in line, or given back.
      const next = this.waiting.shift();
      if (next) next(this.permit());
      else this.inFlight--;
    };
  }
}
