/** Pure data shapes of the dispatch plane, shared by core policy, store mapping and views. */

export const SHARD_COUNT = 64;

/** The aged any-shard lane and the site fallback: an entry waiting this long is claimable by any replica. */
export const SHARD_FALLBACK_MS = 15_000;

/** 0 = system (priority ≥ 100), 1 = interactive (≥ 50), 2 = bulk. Lower dispatches first. */
export type LaneId = 0 | 1 | 2;
export const LANE_NAMES = ['system', 'interactive', 'bulk'] as const;
export type LaneName = (typeof LANE_NAMES)[number];

export function laneOf(priority: number): LaneId {
  return priority >= 100 ? 0 : priority >= 50 ? 1 : 2;
}

/** What a step demands of the runner that takes it; every field optional. */
export interface PlacementRequirement {
  /** A group name, or a set of names (membership). */
  group?: string | string[];
  /** Group attributes, each of which must be in its set: `{ location: ['dc1', 'dc2'] }`. */
  selectors?: Record<string, string[]>;
  labels?: string[];
  executors?: string[];
}

/** A ready step as it sits on queue_ready (and, once claimed, on its lease row). */
export interface QueueEntry {
  stepId: number;
  runId: number;
  shard: number;
  attempt: number;
  priority: number;
  lane: LaneId;
  fairKey: string;
  weight: number;
  pools: string[];
  requirement: PlacementRequirement | null;
  load: number;
  runScope: boolean;
  maxParallel: number;
  siteStamp: string | null;
  readyAt: Date;
  position: number;
  /** Set aside out of the claim path until what it names changes (core/blocking.ts); absent when claimable. */
  blockedOn?: string;
}

/**
 * The classification frozen on a queue row at enqueue. The fair-share weight is not part of it:
 * the enqueue statement takes it from the project's row as it writes the entry.
 */
export type Classification = Pick<QueueEntry, 'priority' | 'lane' | 'fairKey' | 'pools' | 'requirement' | 'load' | 'runScope' | 'maxParallel' | 'siteStamp'>;

/** What placement reads of a runner: its own facts and its group's. */
export interface RunnerPlacement {
  runnerId: string;
  runnerName: string;
  group: string | null;
  labels: string[];
  executors: string[];
  groupAttributes: Record<string, string>;
  exclusive: boolean;
}

/** A parked acquire call: the runner's placement facts and its load. */
export interface Waiter extends RunnerPlacement {
  maxLoad: number;
  /** Sum of the loads of the runner's live leases (including offers handed this tick). */
  runningLoad: number;
  /** How many offers this call still wants. */
  slots: number;
  /** Restrict to one run's work (a pinned runner's extra polls). */
  onlyRunId: number | null;
  drained: boolean;
}
