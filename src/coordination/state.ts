import type { Clock } from '../clock.js';
import type { ShardOwnership } from '../context.js';

/** How long before the lease's own expiry this replica stops trusting it (scheduling jitter, clock rate). */
export const OWNERSHIP_SAFETY_MS = 1_000;

interface Held {
  token: number;
  /** Local clock time after which the lease is no longer trusted, even if no tick ran to say so. */
  trustedUntil: number;
}

/**
 * What the coordination loop last established for this replica. Ownership is only as good as the
 * lease behind it: each held lease carries a local deadline computed from when the tick that took
 * or renewed it started (so it ends before the database lets anyone else take it), and the
 * accessors drop whatever has passed its deadline. If the loop stalls or the store is unreachable,
 * this replica stops dispatching on its own before another replica can take over.
 */
export class CoordinationState implements ShardOwnership {
  private shards = new Map<number, Held>();
  private leader: Held | undefined;
  private sites = new Set<string>();
  // A fresh replica is not known to be out: it answers polls from the start, and owns nothing until its first tick.
  private memberNow = true;

  /** The shards last announced as wanted from live peers (see Coordinator.once). */
  lastAnnouncedWant = '';

  constructor(private readonly clock: Clock) {}

  owned(): number[] {
    const now = this.clock.now();
    const out: number[] = [];
    for (const [shard, held] of this.shards) if (held.trustedUntil > now) out.push(shard);
    return out.sort((a, b) => a - b);
  }

  isLeader(): boolean {
    return this.leader !== undefined && this.leader.trustedUntil > this.clock.now();
  }

  /** The fencing token of the current leadership, for work that must not run under two leaders. */
  leaderToken(): number | undefined {
    return this.isLeader() ? this.leader!.token : undefined;
  }

  liveSites(): Set<string> {
    return new Set(this.sites);
  }

  /** False while this replica is quiesced (or has not yet joined): it offers nothing and answers polls empty. */
  inMembership(): boolean {
    return this.memberNow;
  }

  /** Held shard tokens (for status and tests). */
  shardTokens(): Map<number, number> {
    const now = this.clock.now();
    return new Map([...this.shards].filter(([, h]) => h.trustedUntil > now).map(([s, h]) => [s, h.token]));
  }

  setMembership(member: boolean, liveSites: Iterable<string>): void {
    this.memberNow = member;
    this.sites = new Set(liveSites);
  }

  dropShards(shards: Iterable<number>): void {
    for (const s of shards) this.shards.delete(s);
  }

  /** Replaces the held set with what the database just granted. */
  setShards(granted: Array<{ shard: number; token: number }>, trustedUntil: number): void {
    this.shards = new Map(granted.map((g) => [g.shard, { token: g.token, trustedUntil }]));
  }

  setLeader(token: number | undefined, trustedUntil: number): void {
    this.leader = token === undefined ? undefined : { token, trustedUntil };
  }

  clear(): void {
    this.shards.clear();
    this.leader = undefined;
    this.memberNow = false;
  }
}
