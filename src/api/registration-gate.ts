/** Registrations one replica serves at once: each holds a store connection for its transaction. */
export const REGISTRATIONS_IN_FLIGHT = 8;
/** What a refused registration is told to wait (Retry-After, seconds); the runner adds its own jitter. */
export const REGISTRATION_RETRY_AFTER_S = 1;

/**
 * A small semaphore in front of registration: a fleet registering at once (10,000 machines
 * booted together, a replica restarted behind a load balancer) must not take every store
 * connection from the dispatch plane, nor queue unboundedly in memory. Beyond the permits the
 * answer is 429 with Retry-After at once, before the registration token is even read, so a
 * refusal costs no store work.
 */
export class RegistrationGate {
  private inFlight = 0;

  constructor(readonly permits = REGISTRATIONS_IN_FLIGHT) {}

  /** A permit, released by calling the function returned (twice is harmless); undefined when none is free. */
  enter(): (() => void) | undefined {
    if (this.inFlight >= this.permits) return undefined;
    this.inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
    };
  }

  get busy(): number {
    return this.inFlight;
  }
}
