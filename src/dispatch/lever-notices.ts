import type { EventEmitter } from 'node:events';
import { systemClock } from '../clock.js';
import type { PostureField } from '../core/postures.js';
import { emit } from '../events.js';
import type { LeverNotice } from '../store/lever-notices.js';
import { offersStoppedBy } from './postures.js';
import type { ParkedAcquire, WaiterRegistry } from './waiters.js';

/**
 * How long a lifted drain is remembered. A poll whose runner was read as drained just before the
 * lift (a credential cached here a moment longer than the notice took) parks instead of idling for
 * its whole window; a tick's own read of the drains then decides whether it is offered anything.
 */
export const LIFT_MEMORY_MS = 5_000;

/** What the notices act on: the replica's dispatcher. */
export interface LeverNoticeDeps {
  registry: WaiterRegistry;
  events: EventEmitter;
  /** Something that may let a parked call take work happened: plan again at once. */
  placementChanged(): void;
  /** Wake the dispatch loop now. */
  kick(): void;
  now(): number;
}

const postureOf = (inForce: readonly PostureField[]) => ({
  halted: inForce.includes('halted'),
  systemQuiesced: inForce.includes('system_quiesced'),
  fleetQuiesced: inForce.includes('quiesced'),
});

/**
 * What one replica does with the levers announced on the queue channel (store/lever-notices.ts),
 * so a long poll parked here learns of a drain or a posture at once rather than at the end of its
 * window:
 *
 *  - offers stopped by a posture (none stopped them before): every parked call is answered empty
 *    at once, as held; a runner drained, or a group: the parked calls of its runners likewise. A
 *    call a running tick or hand-off holds, or whose completions are committing, is answered once
 *    it is let go (`settle`, after each pass of the dispatch loop), unless the lever is lifted
 *    first. That is the answer the poll would have got at its window's end: no tick matches a
 *    drained runner or offers anything under a posture, and each reads both afresh.
 *  - offers flowing again, a drain lifted: the loop plans again at once (the memory of unplaced
 *    work is dropped), and the polls of an undrained runner idling here (a drained runner's poll
 *    never parks) park for what is left of their windows, so work that was waiting is offered now.
 *
 * Whether offers are stopped is known only from the notices heard since the listener last
 * connected: a notice may be missed while it reconnects (`missed`), and then the next posture
 * notice is acted on whatever it says, and every idling poll parks.
 */
export class LeverNotices {
  /** Whether the last posture notice stopped offers; null: none heard since the listener (re)connected. */
  private stopped: boolean | null = null;
  /** Calls a lever holds that were busy when it was announced, by the lever's key: answered once let go. */
  private readonly owed = new Map<ParkedAcquire, string>();
  /** The polls of drained runners idling here, by runner id: each woken when its drain lifts. */
  private readonly idling = new Map<string, Set<() => void>>();
  /** Runners whose drain lifted lately, with when (local clock). */
  private readonly lifted = new Map<string, number>();

  constructor(private readonly d: LeverNoticeDeps) {}

  /** A lever announced on the queue channel. */
  heard(n: LeverNotice): void {
    const done = { held: 0, owed: 0, lifted: false };
    if (n.lever === 'posture') {
      const stopped = offersStoppedBy(postureOf(n.inForce)) !== null;
      const was = this.stopped;
      this.stopped = stopped;
      // A change between postures in force (a halt over a quiesce) holds nothing new.
      if (stopped && was !== true) Object.assign(done, this.hold('posture', () => true));
      else if (!stopped && was !== false) done.lifted = this.lift('posture');
    } else if (n.drained) {
      if (n.target === 'runner') this.lifted.delete(n.name);
      Object.assign(done, this.hold(`${n.target}:${n.name}`, n.target === 'runner' ? (a) => a.runner.id === n.name : (a) => a.runner.group === n.name));
    } else {
      if (n.target === 'runner') {
        this.lifted.set(n.name, this.d.now());
        for (const wake of this.idling.get(n.name) ?? []) wake();
      }
      done.lifted = this.lift(`${n.target}:${n.name}`);
    }
    emit(this.d.events, 'lever:heard', { lever: n.lever, ...done });
  }

  /** Notices may have been lost (the listener reconnected): no posture is assumed, and every idling poll parks. */
  missed(): void {
    this.stopped = null;
    for (const wakers of this.idling.values()) for (const wake of wakers) wake();
  }

  /** Answers the calls a lever held while they were busy and that are busy no longer. After each pass of the loop. */
  settle(): void {
    if (this.owed.size === 0) return;
    const { busy } = this.d.registry.answerHeld((a) => this.owed.has(a));
    const still = new Map(busy.map((a) => [a, this.owed.get(a)!]));
    this.owed.clear();
    for (const [a, key] of still) this.owed.set(a, key);
  }

  /**
   * The poll of a drained runner idles here for `ms`: true once its drain is lifted (it is then to
   * park for the rest of its window), false at the window's end or when the caller goes away. A
   * drain lifted lately is taken as lifted at once: the runner row the poll carries may predate it.
   */
  async idleUntilLifted(runnerId: string, ms: number, signal?: AbortSignal): Promise<boolean> {
    const at = this.lifted.get(runnerId);
    if (at !== undefined) {
      if (this.d.now() - at < LIFT_MEMORY_MS) return true;
      this.lifted.delete(runnerId);
    }
    const woken = new AbortController();
    let lifted = false;
    const wake = () => {
      lifted = true;
      woken.abort();
    };
    const gone = () => woken.abort();
    let wakers = this.idling.get(runnerId);
    if (!wakers) this.idling.set(runnerId, (wakers = new Set()));
    wakers.add(wake);
    signal?.addEventListener('abort', gone, { once: true });
    try {
      if (!signal?.aborted) await systemClock.sleep(ms, woken.signal);
    } finally {
      signal?.removeEventListener('abort', gone);
      wakers.delete(wake);
      if (wakers.size === 0) this.idling.delete(runnerId);
    }
    return lifted && !signal?.aborted;
  }

  /** Answers the calls a lever now holds; those busy are owed their answer. */
  private hold(key: string, concerned: (a: ParkedAcquire) => boolean): { held: number; owed: number } {
    const { answered, busy } = this.d.registry.answerHeld(concerned);
    for (const a of busy) this.owed.set(a, key);
    // The pass that lets them go settles them.
    if (busy.length > 0) this.d.kick();
    return { held: answered, owed: busy.length };
  }

  /** A lever lifted: nothing is owed under it any more, and the loop plans again at once. */
  private lift(key: string): true {
    for (const [a, k] of this.owed) if (k === key) this.owed.delete(a);
    const now = this.d.now();
    for (const [id, at] of this.lifted) if (now - at >= LIFT_MEMORY_MS) this.lifted.delete(id);
    this.d.placementChanged();
    return true;
  }
}
