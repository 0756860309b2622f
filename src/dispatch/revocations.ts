import type { ReplicaEnv, ReplicaPart } from '../context.js';
import { listenChannel } from '../store/listen.js';
import { LEASES_REVOKED_CHANNEL } from '../store/lease-revoke.js';

/**
 * The runners' watch calls parked on this replica, woken when a lease of theirs is revoked (a
 * cancel, from any process: the store notifies LEASES_REVOKED_CHANNEL with the runner id). A
 * wake-up only says "look again": the watch call checks its leases in the store itself, so a lost
 * notification costs at most one watch window, never a wrong answer.
 */
export class Revocations {
  private readonly waiting = new Map<string, Set<() => void>>();

  /** Resolves at the next revocation notice for the runner, or when the signal aborts. */
  next(runnerId: string, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const set = this.waiting.get(runnerId) ?? new Set();
      this.waiting.set(runnerId, set);
      const done = () => {
        set.delete(done);
        if (set.size === 0 && this.waiting.get(runnerId) === set) this.waiting.delete(runnerId);
        signal.removeEventListener('abort', done);
        resolve();
      };
      set.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** A lease of this runner was revoked; undefined: notices may have been missed, wake everyone. */
  notify(runnerId?: string): void {
    const sets = runnerId === undefined ? [...this.waiting.values()] : [this.waiting.get(runnerId)].filter((s) => s !== undefined);
    for (const set of sets) for (const w of [...set]) w();
  }

  /** Answers every parked watch (shutdown): each checks once more and returns. */
  drainAll(): void {
    this.notify();
  }
}

/** The replica's revocation feed: LISTEN on the channel, woken watches; its part answers them at shutdown. */
export function revocationFeed(env: Pick<ReplicaEnv, 'listenUrl' | 'log'>): { revocations: Revocations; part: ReplicaPart } {
  const revocations = new Revocations();
  const listener = listenChannel(env.listenUrl, LEASES_REVOKED_CHANNEL, (runnerId) => revocations.notify(runnerId || undefined), (err) => {
    env.log.debug({ err: err.message }, 'lease revocation listener reconnecting');
  });
  return {
    revocations,
    part: {
      halt: async () => {},
      beforeClose: async () => revocations.drainAll(),
      stop: async () => {
        revocations.drainAll();
        await listener.stop();
      },
    },
  };
}
