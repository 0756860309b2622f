import { Unavailable } from '../errors.js';
import { storeCause } from '../store/pool.js';
import type { RunnerRow } from '../store/runners.js';
import type { Offer } from './offers.js';

/** A runner's acquire call parked on this replica until an offer or the end of its window. */
export interface ParkedAcquire {
  seq: number;
  runner: RunnerRow;
  requestId: string;
  slots: number;
  onlyRunId: number | null;
  /**
   * Answer after the first tick that holds this call, offers or none: the call carried
   * completions, whose results must not wait out a poll window on an empty queue.
   */
  oneTick?: boolean;
  /**
   * The call's completions are committing: no tick takes it until they have (the capacity they
   * free is what a tick must see). The hand-off of the steps they free may take it (acquireCarrying).
   */
  carrying?: boolean;
  parkedAt: number;
  /** True once answered (offers, empty, or the caller went away); never handed offers after. */
  settled: boolean;
  /** Held by a running dispatch tick: its window may end, but the answer waits for the tick. */
  reserved: boolean;
  /** Held by a hand-off of freed steps (dispatch/hand-off.ts) until its transaction ends: no tick takes it meanwhile. */
  handOff: boolean;
  /** The window ended while reserved: answer empty when the tick lets go. */
  expired: boolean;
  /** Answered empty because a drain or a posture announced since holds it (dispatch/lever-notices.ts). */
  held?: boolean;
  /** Hands offers to the caller; returns false when it already settled (the caller must hand them back). */
  deliver(offers: Offer[]): boolean;
  /** Answers the caller with an error instead of offers (it retries the same request id); false when it already settled. */
  fail(err: Error): boolean;
}

/** The in-memory set of parked acquires of one replica. */
/** A call still waiting for offers that no tick or hand-off holds and whose completions have committed. */
const isFree = (a: ParkedAcquire): boolean => !a.settled && !a.reserved && !a.handOff && !a.carrying && a.slots > 0;

export class WaiterRegistry {
  private parked = new Map<number, ParkedAcquire>();
  private seq = 0;
  /** Calls parked since the last snapshot (or the last `arrived`), oldest first; settled ones are pruned lazily. */
  private arrivals: ParkedAcquire[] = [];

  park(p: Omit<ParkedAcquire, 'seq' | 'settled' | 'reserved' | 'handOff' | 'expired' | 'deliver' | 'fail'>, timeoutMs: number, signal?: AbortSignal): { acquire: ParkedAcquire; offers: Promise<Offer[]> } {
    let resolveOffers!: (o: Offer[]) => void;
    let rejectOffers!: (err: Error) => void;
    const offers = new Promise<Offer[]>((resolve, reject) => {
      resolveOffers = resolve;
      rejectOffers = reject;
    });
    const settle = (o: Offer[] | Error) => {
      acquire.settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      this.parked.delete(acquire.seq);
      if (o instanceof Error) rejectOffers(o);
      else resolveOffers(o);
    };
    const acquire: ParkedAcquire = {
      ...p,
      seq: ++this.seq,
      settled: false,
      reserved: false,
      handOff: false,
      expired: false,
      deliver: (o) => {
        if (acquire.settled) return false;
        settle(o);
        return true;
      },
      fail: (err) => {
        if (acquire.settled) return false;
        settle(err);
        return true;
      },
    };
    const onAbort = () => !acquire.settled && settle([]);
    // The caller is still connected when our own window ends, so a tick that already chose this
    // call may still answer it; only a caller that went away (abort) forces a hand-back.
    const timer = setTimeout(() => {
      if (acquire.settled) return;
      if (acquire.reserved || acquire.handOff) acquire.expired = true;
      else settle([]);
    }, timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.parked.set(acquire.seq, acquire);
    this.arrivals.push(acquire);
    // Passes that skip the tick never take a snapshot: calls answered meanwhile are dropped here.
    if (this.arrivals.length > 2 * this.parked.size + 64) this.arrivals = this.arrivals.filter((a) => !a.settled);
    // A caller gone (or a shutdown begun) before it parked is answered at once, not at the window's end.
    if (signal?.aborted) onAbort();
    return { acquire, offers };
  }

  /** The acquires parked now, reserved for one tick: a tick delivers only to these. */
  snapshot(): ParkedAcquire[] {
    const list = [...this.parked.values()].filter((a) => !a.settled && !a.handOff && !a.carrying && a.slots > 0);
    for (const a of list) a.reserved = true;
    // A call still carrying its completions is judged once they commit, as an arrival then.
    this.arrivals = this.arrivals.filter((a) => a.carrying && !a.settled);
    return list;
  }

  /**
   * The calls that parked since the last snapshot or the last call of this, and that no tick or
   * hand-off holds, oldest first: what a pass that knows what every earlier call could take has
   * yet to judge. They are judged once: the next call returns only later ones.
   */
  arrived(): ParkedAcquire[] {
    const list = this.arrivals.filter(isFree);
    this.arrivals = this.arrivals.filter((a) => a.carrying && !a.settled);
    return list;
  }

  /** These calls (from `arrived`), reserved for one tick as a snapshot is: those still waiting. */
  hold(list: ParkedAcquire[]): ParkedAcquire[] {
    const held = list.filter(isFree);
    for (const a of held) a.reserved = true;
    return held;
  }

  /**
   * The acquires parked now that no tick holds, reserved for one hand-off of freed steps (which
   * delivers only to these, as a tick does to its snapshot) until `letGo`.
   */
  unheld(max: number): ParkedAcquire[] {
    const list: ParkedAcquire[] = [];
    // Oldest first: the calls that have waited longest are offered first.
    for (const a of this.parked.values()) {
      if (list.length >= max) break;
      if (!isFree(a)) continue;
      a.handOff = true;
      list.push(a);
    }
    return list;
  }

  /**
   * A hand-off is over: calls whose window ended meanwhile and got nothing are answered empty.
   * Unlike a tick's end, a call that waits one tick is left parked for the tick it waits for.
   */
  letGo(list: ParkedAcquire[]): void {
    for (const a of list) {
      a.handOff = false;
      if (a.expired && !a.reserved && !a.settled) a.deliver([]);
    }
  }

  /**
   * The acquires that parked since the running tick took its snapshot (or its last join), oldest
   * first and as many as `maxSlots` can serve in full, reserved for it too: a tick still planning
   * takes them in instead of leaving them for the next one. `arrivalsOnly`: of the calls not yet
   * returned by `arrived` alone (a tick over new calls leaves the others, judged already, out).
   */
  joiners(maxSlots: number, arrivalsOnly = false): ParkedAcquire[] {
    const list: ParkedAcquire[] = [];
    for (const a of arrivalsOnly ? this.arrivals : this.parked.values()) {
      if (!isFree(a)) continue;
      if (a.slots > maxSlots) break;
      maxSlots -= a.slots;
      a.reserved = true;
      list.push(a);
    }
    // A tick's joiners are judged by it: they are not arrivals still to judge.
    if (list.length > 0) this.arrivals = this.arrivals.filter((a) => !a.reserved);
    return list;
  }

  /**
   * The tick failed, maybe after its delivery committed (a connection lost on the way back, a
   * primary that died as it replicated the commit): nothing it held may be answered empty, or a
   * delivery it made would be stranded with a runner that never heard of it. Each call it held and
   * did not answer gets a 503 (`store unavailable: … retry`); the runner retries the same request
   * id, and the retry finds what was delivered under it in the store (leaseByRequest) or parks afresh.
   */
  failUnanswered(list: ParkedAcquire[], cause: unknown): void {
    const err = new Unavailable(`store unavailable: ${storeCause(cause)} (an offer to this call may have been delivered; retry the same request_id)`, 'store_unavailable');
    for (const a of list) if (!a.settled) a.fail(err);
  }

  /** The tick is over: calls whose window ended meanwhile, or that wait one tick only, and got nothing are answered empty. */
  unreserve(list: ParkedAcquire[]): void {
    for (const a of list) {
      a.reserved = false;
      if ((a.expired || a.oneTick) && !a.settled) a.deliver([]);
    }
  }

  /**
   * Calls that wait one tick only, answered empty without one: the queue was known to hold
   * nothing due, so the tick could only have answered them so.
   */
  answerOneTick(): void {
    for (const a of [...this.parked.values()]) if (a.oneTick && !a.settled && !a.reserved && !a.handOff && !a.carrying) a.deliver([]);
  }

  /** The call's completions have committed (or failed): it is an ordinary parked call from now on. */
  carried(a: ParkedAcquire): void {
    a.carrying = false;
  }

  /**
   * Answers empty, as held, every call `concerned` selects that no tick or hand-off holds and whose
   * completions have committed: how many it answered, and the selected calls still held so (to be
   * answered once let go).
   */
  answerHeld(concerned: (a: ParkedAcquire) => boolean): { answered: number; busy: ParkedAcquire[] } {
    const busy: ParkedAcquire[] = [];
    let answered = 0;
    // Answering removes a call from the map as it is visited, which a Map's iteration allows.
    for (const a of this.parked.values()) {
      if (a.settled || !concerned(a)) continue;
      if (!isFree(a)) {
        busy.push(a);
        continue;
      }
      a.held = true;
      if (a.deliver([])) answered++;
    }
    return { answered, busy };
  }

  get size(): number {
    return this.parked.size;
  }

  /** Answers every parked acquire empty (shutdown, replica quiesce). */
  drainAll(): void {
    for (const a of [...this.parked.values()]) a.deliver([]);
  }
}
