import type { FeedState } from '../../src/tui/feed.js';
import type { AdminQueueView, VerdictGroup, WaitingEntry } from '../../src/views/admin-queue.js';

export const AT = Date.parse('2026-03-01T12:00:00.000Z');
const iso = (msAgo: number) => new Date(AT - msAgo).toISOString();

function entry(i: number, code: WaitingEntry['verdict']['code'], satisfiable: boolean): WaitingEntry {
  return {
    stepId: 1000 + i,
    runId: 100 + (i % 7),
    attempt: 1,
    lane: 'bulk',
    fairKey: i % 2 ? 'acme' : 'zeta',
    readyAt: iso(60_000 + i),
    waitingMs: 600_000 - i,
    load: 1,
    pools: [],
    requirement: code === 'no_runner_matches' ? { labels: ['gpu'] } : null,
    pinnedRunner: null,
    verdict: { code, reason: code === 'no_runner_matches' ? 'no runner matches: closest build-1 (no label gpu)' : 'waiting for a dispatch tick', satisfiable, runner: code === 'no_runner_matches' ? 'build-1' : null },
    closest: { runner: 'build-1', gaps: code === 'no_runner_matches' ? ['no label gpu'] : [] },
  };
}

function group(code: WaitingEntry['verdict']['code'], count: number, satisfiable: boolean, listed = Math.min(count, 50)): VerdictGroup {
  const entries = Array.from({ length: listed }, (_, i) => entry(i, code, satisfiable));
  return { code, count, satisfiable, oldestWaitingMs: entries[0]?.waitingMs ?? 0, oldestStepId: entries[0]?.stepId ?? 0, entries };
}

/** A fixed, busy view: two replicas, two runners, two leases, two verdict groups. */
export function busyView(over: Partial<AdminQueueView> = {}): AdminQueueView {
  const shards = Array.from({ length: 64 }, (_, i) => (i % 2 ? 'rep-b' : 'rep-a'));
  return {
    at: new Date(AT).toISOString(),
    postures: { halted: false, fleetQuiesced: false, quiesced: false, systemQuiesced: false, reason: null, actor: null, since: iso(86_400_000), drains: [] },
    lanes: [
      { lane: 'system', ready: 0, readyEstimated: false, leased: 0, oldestReadyAt: null, oldestAgeMs: null, projects: [] },
      { lane: 'interactive', ready: 3, readyEstimated: false, leased: 1, oldestReadyAt: iso(5_000), oldestAgeMs: 5_000, projects: [] },
      {
        lane: 'bulk',
        ready: 7,
        readyEstimated: false,
        leased: 1,
        oldestReadyAt: iso(600_000),
        oldestAgeMs: 600_000,
        projects: [{ fairKey: 'acme', weight: 2, delivered: 30, share: 0.6, pass: 15_728_640 }, { fairKey: 'zeta', weight: 1, delivered: 20, share: 0.4, pass: 20_971_520 }],
      },
    ],
    exactBound: 5_000,
    deliveries: { windowMs: 60_000, total: 50 },
    pools: [{ name: 'db', held: 1, limit: 2 }],
    leases: {
      total: 2,
      shown: 2,
      items: [
        { stepId: 11, step: 'migrate', runId: 5, run: 'deploy-web', target: 'acme/prod/web', project: 'acme', attempt: 1, lane: 'bulk', holder: 'rep-a', runnerId: 'r-1', runner: 'build-1', delivered: true, acked: true, renewed: true, executing: true, acquiredAt: iso(120_000), expiresAt: iso(-40_000), expiresInMs: 40_000, ttlMs: 180_000 },
        { stepId: 12, step: 'smoke', runId: 6, run: 'deploy-api', target: 'zeta/prod/api', project: 'zeta', attempt: 2, lane: 'interactive', holder: 'rep-b', runnerId: 'r-2', runner: 'build-2', delivered: true, acked: false, renewed: false, executing: false, acquiredAt: iso(10_000), expiresAt: iso(-170_000), expiresInMs: 170_000, ttlMs: 180_000 },
      ],
    },
    replicas: {
      live: 2,
      total: 2,
      items: [
        { id: 'rep-a', site: null, state: 'live', heartbeatAgeMs: 1_000, shards: 32, leader: true },
        { id: 'rep-b', site: null, state: 'live', heartbeatAgeMs: 2_000, shards: 32, leader: false },
      ],
    },
    leader: { replicaId: 'rep-a', since: iso(3_600_000) },
    shards,
    runners: [
      { id: 'r-1', name: 'build-1', group: 'linux', labels: ['linux'], executors: ['shell'], site: null, state: 'online', drained: false, drainedBy: null, drainReason: null, load: { used: 1, max: 4 }, slots: { used: 1, max: 2 }, leases: 1, lastSeenAt: iso(3_000), lastSeenAgeMs: 3_000, registrationToken: null },
      { id: 'r-2', name: 'build-2', group: 'linux', labels: ['linux'], executors: ['shell'], site: null, state: 'watch', drained: false, drainedBy: null, drainReason: null, load: { used: 4, max: 4 }, slots: { used: 1, max: 2 }, leases: 1, lastSeenAt: iso(70_000), lastSeenAgeMs: 70_000, registrationToken: null },
    ],
    waiting: { ready: 10, readyEstimated: false, sampleSize: 10, sampled: false, groups: [group('no_runner_matches', 2, false), group('waiting_for_tick', 8, true)] },
    ...over,
  };
}

export function emptyView(): AdminQueueView {
  const v = busyView();
  return {
    ...v,
    lanes: v.lanes.map((l) => ({ ...l, ready: 0, leased: 0, oldestReadyAt: null, oldestAgeMs: null, projects: [] })),
    deliveries: { windowMs: 60_000, total: 0 },
    pools: [],
    leases: { total: 0, shown: 0, items: [] },
    runners: [],
    waiting: { ready: 0, readyEstimated: false, sampleSize: 0, sampled: false, groups: [] },
  };
}

/** Ten thousand ready entries, all unplaceable: the sample lists the oldest fifty. */
export function deepView(): AdminQueueView {
  const v = busyView();
  return {
    ...v,
    lanes: v.lanes.map((l) => (l.lane === 'bulk' ? { ...l, ready: 10_000, readyEstimated: true } : l)),
    waiting: { ready: 10_003, readyEstimated: true, sampleSize: 1_000, sampled: true, groups: [group('no_runner_matches', 10_000, false)] },
  };
}

export function feedOf(view: AdminQueueView | null, over: Partial<FeedState> = {}): FeedState {
  return {
    view,
    fetchedAt: view ? AT - 400 : null,
    stale: null,
    history: Array.from({ length: 30 }, (_, i) => ({ at: AT - (30 - i) * 1000, ready: [0, i % 4, 7 + i] })),
    moved: new Map(),
    refreshes: 30,
    ...over,
  };
}
