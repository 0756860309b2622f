import { LANE_NAMES, type LaneName, type PlacementRequirement } from '../core/entry.js';
import { verdict, type VerdictCode } from '../core/verdict.js';
import type { FleetQueueSnapshot, LeasedEntry } from '../store/fleet.js';

/** The verdict codes of the ladder, plus the two states of an entry that already has a lease. */
export type FleetQueueCode = VerdictCode | 'claimed' | 'leased';

export interface FleetQueueEntry {
  stepId: number;
  /** The step's name in its run file (null when the step row is gone). */
  step: string | null;
  runId: number;
  attempt: number;
  state: 'ready' | 'leased';
  lane: LaneName;
  priority: number;
  fairKey: string;
  weight: number;
  pools: string[];
  requirement: PlacementRequirement | null;
  load: number;
  runScope: boolean;
  maxParallel: number;
  pinnedRunner: string | null;
  /**
   * What a ready entry is set aside on, out of the claim path, until it changes (`pool:NAME`,
   * `run:ID`, `fleet`); null while claimable. Always null for a leased entry.
   */
  blockedOn: string | null;
  readyAt: string;
  /** Since ready_at, by the database clock. */
  waitingMs: number;
  verdict: { code: FleetQueueCode; reason: string; satisfiable: boolean; runner: string | null };
  lease: null | {
    holder: string;
    runnerId: string | null;
    runnerName: string | null;
    claimedAt: string;
    deliveredAt: string | null;
    ackedAt: string | null;
    expiresAt: string;
    executing: boolean;
  };
}

export interface FleetQueueView {
  at: string;
  /** `quiesced`: the fleet quiesce's first field name, deprecated, still sent beside `fleetQuiesced` (docs/levers.md). */
  posture: { halted: boolean; fleetQuiesced: boolean; quiesced: boolean; systemQuiesced: boolean; reason: string | null };
  summary: { ready: number; readyShown: number; leased: number; unsatisfiable: number; byCode: Partial<Record<FleetQueueCode, number>> };
  entries: FleetQueueEntry[];
}

/**
 * Every ready entry with the verdict dispatch would reach for it, and every leased entry with its
 * holder: the "why is it waiting" read model shared by `fleet queue` and the dashboard.
 */
export function buildFleetQueue(s: FleetQueueSnapshot, opts: { acceptExceeding: boolean }): FleetQueueView {
  const names = new Map(s.runners.map((r) => [r.runnerId, r.runnerName]));
  const postures = { halted: s.posture.halted, fleetQuiesced: s.posture.fleetQuiesced, systemQuiesced: s.posture.systemQuiesced, reason: s.posture.reason, acceptExceeding: opts.acceptExceeding };
  const fleet = { runners: s.runners, outstandingByRun: s.outstandingByRun, runnerRuns: s.runnerRuns };
  const base = (e: FleetQueueSnapshot['ready'][number]) => ({
    stepId: e.stepId,
    step: s.stepNames?.get(e.stepId) ?? null,
    runId: e.runId,
    attempt: e.attempt,
    lane: LANE_NAMES[e.lane],
    priority: e.priority,
    fairKey: e.fairKey,
    weight: e.weight,
    pools: e.pools,
    requirement: e.requirement,
    load: e.load,
    runScope: e.runScope,
    maxParallel: e.maxParallel,
    pinnedRunner: s.pins.get(e.runId) ?? null,
    blockedOn: e.blockedOn ?? null,
    readyAt: e.readyAt.toISOString(),
    waitingMs: Math.max(0, s.now.getTime() - e.readyAt.getTime()),
  });
  const entries: FleetQueueEntry[] = [];
  for (const e of s.ready) {
    const v = verdict(e, fleet, postures, s.pools, s.pins);
    entries.push({ ...base(e), state: 'ready', verdict: { code: v.code, reason: v.reason, satisfiable: v.satisfiable, runner: v.runner ?? null }, lease: null });
  }
  for (const e of s.leased) entries.push({ ...base(e), state: 'leased', verdict: leasedVerdict(e, names), lease: leaseOf(e, names) });

  const byCode: Partial<Record<FleetQueueCode, number>> = {};
  for (const e of entries) byCode[e.verdict.code] = (byCode[e.verdict.code] ?? 0) + 1;
  return {
    at: s.now.toISOString(),
    posture: { halted: s.posture.halted, fleetQuiesced: s.posture.fleetQuiesced, quiesced: s.posture.fleetQuiesced, systemQuiesced: s.posture.systemQuiesced, reason: s.posture.reason },
    summary: { ready: s.readyTotal, readyShown: s.ready.length, leased: s.leased.length, unsatisfiable: entries.filter((e) => !e.verdict.satisfiable).length, byCode },
    entries,
  };
}

function leasedVerdict(e: LeasedEntry, names: Map<string, string>): FleetQueueEntry['verdict'] {
  if (!e.runnerId) return { code: 'claimed', reason: `claimed by replica ${e.holder}, not yet delivered`, satisfiable: true, runner: null };
  const name = names.get(e.runnerId) ?? e.runnerId;
  const stage = e.executing ? 'executing' : e.ackedAt ? 'acknowledged' : 'offered';
  return { code: 'leased', reason: `leased to ${name} (${stage})`, satisfiable: true, runner: name };
}

function leaseOf(e: LeasedEntry, names: Map<string, string>): FleetQueueEntry['lease'] {
  return {
    holder: e.holder,
    runnerId: e.runnerId,
    runnerName: e.runnerId ? (names.get(e.runnerId) ?? null) : null,
    claimedAt: e.claimedAt.toISOString(),
    deliveredAt: e.deliveredAt?.toISOString() ?? null,
    ackedAt: e.ackedAt?.toISOString() ?? null,
    expiresAt: e.expiresAt.toISOString(),
    executing: e.executing,
  };
}

/** Human duration of a wait: 45s, 3m12s, 2h05m. */
export function formatWait(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Table rows for the CLI: step, run, attempt, lane, fair key, state, waiting, verdict. */
export function fleetQueueRows(view: FleetQueueView): string[][] {
  return view.entries.map((e) => [
    e.step ? `${e.step} (${e.stepId})` : String(e.stepId),
    String(e.runId),
    String(e.attempt),
    e.lane,
    e.fairKey,
    e.state,
    formatWait(e.waitingMs),
    `${e.verdict.satisfiable ? '' : '✗ '}${e.verdict.reason}`,
  ]);
}

export const FLEET_QUEUE_HEAD = ['step', 'run', 'attempt', 'lane', 'fair key', 'state', 'waiting', 'verdict'];
