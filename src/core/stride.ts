import type { LaneId, QueueEntry } from './entry.js';

/** The pass a fair key advances by per delivered step at weight 1. */
export const STRIDE_UNIT = 2 ** 20;
/** Passes are rebased to zero before they lose integer precision. */
const REBASE_AT = 2 ** 45;
const COMPACT_EVERY = 256;

interface LaneState {
  passes: Map<string, number>;
  /**
   * The lane's virtual time: the pass at which the last delivery was picked, never decreasing.
   * A key first seen, or one idle long enough to fall behind, competes from here, so it is served
   * within one round without a backlog of credit that would starve everyone else.
   */
  floor: number;
}

/**
 * Stride fair-share state of one dispatcher: per lane, per fair key, a pass advanced by
 * 2^20 / weight on every delivery; the lowest pass goes next. In memory only: a restart resets it
 * and loses nothing but a little short-term history.
 */
export class FairShare {
  private readonly lanes = new Map<LaneId, LaneState>();
  private charges = 0;

  private lane(lane: LaneId): LaneState {
    let s = this.lanes.get(lane);
    if (!s) {
      s = { passes: new Map(), floor: 0 };
      this.lanes.set(lane, s);
    }
    return s;
  }

  /** The key's pass as ordering sees it: a key first seen joins at the lane's current minimum. */
  passOf(lane: LaneId, key: string): number {
    const s = this.lanes.get(lane);
    if (!s) return 0;
    return Math.max(s.passes.get(key) ?? s.floor, s.floor);
  }

  /** Records one delivered step of the key. Call only for deliveries that happened. */
  charge(lane: LaneId, key: string, weight: number): void {
    const s = this.lane(lane);
    const start = this.passOf(lane, key);
    s.floor = Math.max(s.floor, start);
    s.passes.set(key, start + STRIDE_UNIT / (weight > 0 ? weight : 1));
    if (s.floor > REBASE_AT) {
      for (const [k, p] of s.passes) s.passes.set(k, p - s.floor);
      s.floor = 0;
    }
    if (++this.charges % COMPACT_EVERY === 0) this.compact();
  }

  /** Charges every delivered entry, in delivery order. */
  chargeAll(entries: Iterable<Pick<QueueEntry, 'lane' | 'fairKey' | 'weight'>>): void {
    for (const e of entries) this.charge(e.lane, e.fairKey, e.weight);
  }

  /** A copy a tick's plan can charge tentatively without touching the dispatcher's state. */
  clone(): FairShare {
    const c = new FairShare();
    for (const [lane, s] of this.lanes) c.lanes.set(lane, { passes: new Map(s.passes), floor: s.floor });
    c.charges = this.charges;
    return c;
  }

  /** Keys at or below the floor carry no information (they read as the floor): forget them. */
  private compact(): void {
    for (const s of this.lanes.values()) for (const [k, p] of s.passes) if (p <= s.floor) s.passes.delete(k);
  }

  /** For inspection: every known key's pass per lane. */
  snapshot(): Array<{ lane: LaneId; floor: number; passes: Record<string, number> }> {
    return [...this.lanes].map(([lane, s]) => ({ lane, floor: s.floor, passes: Object.fromEntries(s.passes) }));
  }
}

const fifo = (a: QueueEntry, b: QueueEntry): number => a.readyAt.getTime() - b.readyAt.getTime() || a.position - b.position;

/**
 * The dispatch order of one claimed batch: (lane, stride pass, ready_at/position), evaluated
 * lazily, because the pass of a key changes with every delivery the caller records on `fair`.
 * `next()` yields the head of the lowest-pass key of the highest lane still holding claims; an
 * entry that is not delivered charges nothing, so its key stays next and offers its following
 * entry (no head-of-line blocking within a key).
 */
export class DispatchOrder {
  private readonly byLane = new Map<LaneId, Map<string, QueueEntry[]>>();

  constructor(claims: QueueEntry[], private readonly fair: FairShare) {
    for (const e of [...claims].sort(fifo)) {
      let keys = this.byLane.get(e.lane);
      if (!keys) this.byLane.set(e.lane, (keys = new Map()));
      let q = keys.get(e.fairKey);
      if (!q) keys.set(e.fairKey, (q = []));
      q.push(e);
    }
  }

  next(): QueueEntry | undefined {
    const lanes = [...this.byLane.keys()].sort((a, b) => a - b);
    for (const lane of lanes) {
      const keys = this.byLane.get(lane)!;
      // Plain locals, not a record per key: a tick calls this once per claim over every key.
      let bestQ: QueueEntry[] | undefined;
      let bestKey = '';
      let bestPass = 0;
      for (const [key, q] of keys) {
        const pass = this.fair.passOf(lane, key);
        if (!bestQ || pass < bestPass || (pass === bestPass && fifo(q[0], bestQ[0]) < 0)) {
          bestQ = q;
          bestKey = key;
          bestPass = pass;
        }
      }
      if (!bestQ) {
        this.byLane.delete(lane);
        continue;
      }
      const head = bestQ.shift()!;
      if (bestQ.length === 0) keys.delete(bestKey);
      if (keys.size === 0) this.byLane.delete(lane);
      return head;
    }
    return undefined;
  }
}

/** The whole batch in dispatch order as if every entry were delivered (views, tests). */
export function dispatchOrder(claims: QueueEntry[], fair: FairShare): QueueEntry[] {
  const scratch = fair.clone();
  const order = new DispatchOrder(claims, scratch);
  const out: QueueEntry[] = [];
  for (let e = order.next(); e; e = order.next()) {
    out.push(e);
    scratch.charge(e.lane, e.fairKey, e.weight);
  }
  return out;
}
