import { blockingKey } from '../core/blocking.js';
import type { QueueEntry } from '../core/entry.js';
import { verdict, type Postures } from '../core/verdict.js';
import { queueVerdictInputsRead, type VerdictInputs } from '../store/fleet.js';
import type { Db } from '../store/pool.js';
import { queueBlock, queueBlockedRead, queueUnblock } from '../store/queue.js';

/** How often a replica checks its blocked entries again when nothing nudges it sooner. */
export const UNBLOCK_EVERY_MS = 1_000;
/**
 * How long after a lease ends here the entries set aside on what it freed are checked: at once,
 * since that check reads only those keys through their index (a run at its cap waits for it).
 */
export const UNBLOCK_NUDGED_MS = 0;

/**
 * Postures are not a reason to set anything aside: a held fleet claims nothing, so nothing is
 * hidden; the verdict is taken as if offers flowed, to find what would still stop the entry.
 */
const flowing = (acceptExceeding: boolean): Postures => ({ halted: false, fleetQuiesced: false, acceptExceeding });

const blockingOf = (e: QueueEntry, inputs: VerdictInputs, acceptExceeding: boolean) => {
  const v = verdict(e, inputs, flowing(acceptExceeding), inputs.pools, inputs.pins);
  return { on: blockingKey(e, v, inputs.pools), verdict: v.code };
};
const keyOf = (e: QueueEntry, inputs: VerdictInputs, acceptExceeding: boolean) => blockingOf(e, inputs, acceptExceeding).on;

/**
 * The verdict inputs of these entries by the read the queue views use (queueVerdictInputsRead),
 * so an entry is set aside on the verdict `fleet queue` shows for it, postures aside (`flowing`).
 */
const inputsOf = (db: Db, entries: QueueEntry[]) => queueVerdictInputsRead(db, { runIds: entries.map((e) => e.runId), pools: entries.flatMap((e) => e.pools), posture: false });

/**
 * Sets aside the entries a tick could not place whose verdict over the whole fleet is one only a
 * change elsewhere can end (core/blocking.ts); entries waiting for capacity keep their place.
 * Returns how many were set aside.
 */
export async function blockUnplaceable(db: Db, unplaced: QueueEntry[], acceptExceeding: boolean, recent?: RecentlyClaimable): Promise<number> {
  const entries = recent ? unplaced.filter((e) => !recent.has(e)) : unplaced;
  if (entries.length === 0) return 0;
  const inputs = await inputsOf(db, entries);
  const items: Array<{ stepId: number; on: string; verdict: string }> = [];
  for (const e of entries) {
    const { on, verdict: code } = blockingOf(e, inputs, acceptExceeding);
    if (on) items.push({ stepId: e.stepId, on, verdict: code });
    else recent?.add(e);
  }
  return queueBlock(db, items);
}

/**
 * Shapes (requirement and load) of entries in no pool and no run scope that were judged
 * claimable a moment ago: their matching runners were only busy or between polls. A busy estate
 * meets the same shapes on every tick; judging each once a second, not once a tick, spares a
 * read of the whole fleet per tick. A shape's verdict that changes meanwhile is seen when the
 * memory lapses.
 */
export class RecentlyClaimable {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly now: () => number,
    private readonly forMs = UNBLOCK_EVERY_MS,
  ) {}

  private static key(e: QueueEntry): string | null {
    return e.pools.length === 0 && !e.runScope ? `${e.load} ${JSON.stringify(e.requirement)}` : null;
  }

  has(e: QueueEntry): boolean {
    const k = RecentlyClaimable.key(e);
    if (k === null) return false;
    const t = this.until.get(k);
    if (t === undefined) return false;
    if (t > this.now()) return true;
    this.until.delete(k);
    return false;
  }

  add(e: QueueEntry): void {
    const k = RecentlyClaimable.key(e);
    if (k !== null) this.until.set(k, this.now() + this.forMs);
  }
}

export interface UnblockResult {
  /** Blocked entries of the shards checked, before the check. */
  blocked: number;
  /** Entries put back in the claim path. */
  returned: number;
}

/**
 * One pass over the blocked entries of these shards (of these keys alone, when given): each group (key, requirement, load) whose
 * verdict no longer blocks on the same key goes back to the claim path at its own position, and
 * the dispatchers are woken. A group still blocked stays; one blocked for another reason comes
 * back too, and the next tick that meets it sets it aside under its new key.
 */
export async function unblockOnce(db: Db, p: { shards: number[]; acceptExceeding: boolean; keys?: string[] }): Promise<UnblockResult> {
  if (p.shards.length === 0 || p.keys?.length === 0) return { blocked: 0, returned: 0 };
  const groups = await queueBlockedRead(db, { shards: p.shards, keys: p.keys });
  if (groups.length === 0) return { blocked: 0, returned: 0 };
  const inputs = await inputsOf(db, groups.map((g) => g.entry));
  const back = groups.filter((g) => keyOf(g.entry, inputs, p.acceptExceeding) !== g.entry.blockedOn).map((g) => g.entry);
  const blocked = groups.reduce((n, g) => n + g.count, 0);
  return { blocked, returned: await queueUnblock(db, { shards: p.shards, groups: back }) };
}

/**
 * When a replica next checks its blocked entries: all of them every UNBLOCK_EVERY_MS, and, sooner
 * (UNBLOCK_NUDGED_MS), only those set aside on what leases that just ended here freed (their
 * run-scoped runs, their pools), read through the key's index. What changes elsewhere (a
 * pool released or a runner registered on another replica, an undrain) is seen by the full check,
 * within UNBLOCK_EVERY_MS.
 */
export class UnblockCadence {
  private lastFullAt = Number.NEGATIVE_INFINITY;
  private nudgedAt: number | null = null;
  private readonly keys = new Set<string>();

  /** Leases ended here: entries blocked on these keys may be placeable now. */
  nudge(keys: string[], nowMs = Number.NEGATIVE_INFINITY): void {
    if (keys.length === 0) return;
    for (const k of keys) this.keys.add(k);
    this.nudgedAt ??= nowMs;
  }

  /**
   * What to check and when: `inMs` 0 means now; `keys` undefined is every blocked entry, else
   * only those keys. Taking a due check counts it as run.
   */
  next(nowMs: number): { inMs: number; keys?: string[] } {
    const fullIn = Math.max(0, this.lastFullAt + UNBLOCK_EVERY_MS - nowMs);
    if (fullIn === 0) {
      this.lastFullAt = nowMs;
      this.keys.clear();
      this.nudgedAt = null;
      return { inMs: 0 };
    }
    if (this.nudgedAt !== null) {
      const keyedIn = Math.max(0, this.nudgedAt + UNBLOCK_NUDGED_MS - nowMs);
      if (keyedIn === 0) {
        const keys = [...this.keys];
        this.keys.clear();
        this.nudgedAt = null;
        return { inMs: 0, keys };
      }
      return { inMs: Math.min(fullIn, keyedIn) };
    }
    return { inMs: fullIn };
  }
}
