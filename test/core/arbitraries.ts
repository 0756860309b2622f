import fc from 'fast-check';
import { laneOf, type PlacementRequirement, type QueueEntry, type Waiter } from '../../src/core/entry.js';
import type { VerdictRunner } from '../../src/core/verdict.js';

let seq = 0;
/** A queue entry with defaults; position increases with every call unless given. */
export function entry(p: Partial<QueueEntry> = {}): QueueEntry {
  seq += 1;
  const priority = p.priority ?? 0;
  return {
    stepId: seq,
    runId: seq,
    shard: 0,
    attempt: 1,
    priority,
    lane: laneOf(priority),
    fairKey: 'default',
    weight: 1,
    pools: [],
    requirement: null,
    load: 1,
    runScope: false,
    maxParallel: 1,
    siteStamp: null,
    readyAt: new Date(1_700_000_000_000),
    position: seq,
    ...p,
    ...(p.priority !== undefined && p.lane === undefined ? { lane: laneOf(priority) } : {}),
  };
}

export function waiter(p: Partial<Waiter> & { runnerId: string }): Waiter {
  return {
    runnerName: p.runnerId,
    group: null,
    labels: [],
    executors: ['shell'],
    groupAttributes: {},
    exclusive: false,
    maxLoad: 4,
    runningLoad: 0,
    slots: 1,
    onlyRunId: null,
    drained: false,
    ...p,
  };
}

export const GROUPS = ['build', 'deploy', 'prod'];
export const LABELS = ['linux', 'arm', 'gpu', 'db-access'];
export const EXECUTORS = ['shell', 'docker'];
export const LOCATIONS = ['dc1', 'dc2', 'dc3'];

const subset = <T>(xs: T[]) => fc.subarray(xs);

export const requirementArb: fc.Arbitrary<PlacementRequirement | null> = fc.option(
  fc.record(
    {
      group: fc.oneof(fc.constantFrom(...GROUPS), fc.subarray(GROUPS, { minLength: 1 })),
      selectors: fc.record({ location: fc.subarray(LOCATIONS, { minLength: 1 }) }, { requiredKeys: [] }),
      labels: subset(LABELS),
      executors: subset(EXECUTORS),
    },
    { requiredKeys: [] },
  ),
  { freq: 3 },
);

/** A fleet of 0..6 runners with random postures, drains and loads; ids r0..rN. */
export const fleetArb: fc.Arbitrary<VerdictRunner[]> = fc
  .array(
    fc.record({
      group: fc.option(fc.constantFrom(...GROUPS), { freq: 4 }),
      labels: subset(LABELS),
      executors: subset(EXECUTORS),
      location: fc.option(fc.constantFrom(...LOCATIONS), { freq: 4 }),
      exclusive: fc.boolean(),
      maxLoad: fc.constantFrom(1, 2, 4, 8),
      runningLoad: fc.constantFrom(0, 0, 0.5, 1, 2, 4),
      drained: fc.constantFrom(false, false, false, true),
      online: fc.constantFrom(true, true, true, false),
    }),
    { maxLength: 6 },
  )
  .map((rs) =>
    rs.map((r, i): VerdictRunner => ({
      runnerId: `r${i}`,
      runnerName: `runner-${i}`,
      group: r.group,
      labels: r.labels,
      executors: r.executors,
      groupAttributes: r.location ? { location: r.location } : ({} as Record<string, string>),
      exclusive: r.group !== null && r.exclusive,
      maxLoad: r.maxLoad,
      runningLoad: Math.min(r.runningLoad, r.maxLoad),
      drained: r.drained,
      online: r.online,
    })),
  );
