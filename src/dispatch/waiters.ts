import type { RunnerRow } from '../store/runners.js';
import type { Offer } from './offers.js';

/** A runner's acquire call parked on this replica until an offer or the end of its window. */
export interface ParkedAcquire {
  seq: number;
  runner: RunnerRow;
  requestId: string;
  slots: number;
  onlyRunId: number | null;
  parkedAt: number;
  /** True once answered (offers, empty, or the caller went away); never handed offers after. */
  settled: boolean;
  /** Hands offers to the caller; returns false when it already settled (the caller must hand them back). */
  deliver(offers: Offer[]): boolean;
}

/** The in-memory set of parked acquires of one replica. */
export class WaiterRegistry {
  private parked = new Map<number, ParkedAcquire>();
  private seq = 0;

  park(p: Omit<ParkedAcquire, 'seq' | 'settled' | 'deliver'>, timeoutMs: number, signal?: AbortSignal): { acquire: ParkedAcquire; offers: Promise<Offer[]> } {
    let resolveOffers!: (o: Offer[]) => void;
    const offers = new Promise<Offer[]>((r) => (resolveOffers = r));
    const settle = (o: Offer[]) => {
      acquire.settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      this.parked.delete(acquire.seq);
      resolveOffers(o);
    };
    const acquire: ParkedAcquire = {
      ...p,
      seq: ++this.seq,
      settled: false,
      deliver: (o) => {
        if (acquire.settled) return false;
        settle(o);
        return true;
      },
    };
    const onAbort = () => !acquire.settled && settle([]);
    const timer = setTimeout(() => !acquire.settled && settle([]), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.parked.set(acquire.seq, acquire);
    return { acquire, offers };
  }

  /** The acquires parked now: a tick delivers only to these. */
  snapshot(): ParkedAcquire[] {
    return [...this.parked.values()].filter((a) => !a.settled && a.slots > 0);
  }

  get size(): number {
    return this.parked.size;
  }

  /** Answers every parked acquire empty (shutdown, replica quiesce). */
  drainAll(): void {
    for (const a of [...this.parked.values()]) a.deliver([]);
  }
}
