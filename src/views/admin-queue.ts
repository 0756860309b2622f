import { LANE_NAMES, type LaneName, type PlacementRequirement } from '../core/entry.js';
import { replicaState, type ReplicaState } from '../core/replica-state.js';
import { closestRunner, verdict, VERDICT_CODES, type VerdictCode } from '../core/verdict.js';
import type { Wire } from '../core/wire.js';
import type { AdminQueueSnapshot } from '../store/admin-queue.js';
import type { FleetPosture, PostureStory } from '../store/posture.js';
import { age, count, duration, durationText, text, type Cell, type CellTable, type Tone } from './cells.js';
import { buildRunners, type RunnerView } from './runners.js';

/** Stride's pass advance per delivery at weight 1 (the dispatcher's STRIDE constant). */
const STRIDE_UNIT = 2 ** 20;

export interface ProjectShare {
  fairKey: string;
  weight: number;
  /** Deliveries in the window. */
  delivered: number;
  /** Of the lane's deliveries in the window, 0..1. */
  share: number;
  /** The stride pass this key advanced over the window: delivered × 2^20 / weight. */
  pass: number;
}

export interface LaneView {
  lane: LaneName;
  ready: number;
  /** `ready` is a statistics estimate (the lane is deeper than the exact bound). */
  readyEstimated: boolean;
  leased: number;
  oldestReadyAt: string | null;
  oldestAgeMs: number | null;
  projects: ProjectShare[];
}

export interface LeaseView {
  stepId: number;
  step: string | null;
  runId: number;
  run: string | null;
  target: string | null;
  project: string | null;
  attempt: number;
  lane: LaneName;
  holder: string;
  runnerId: string | null;
  runner: string | null;
  delivered: boolean;
  acked: boolean;
  renewed: boolean;
  executing: boolean;
  acquiredAt: string;
  expiresAt: string;
  expiresInMs: number;
  ttlMs: number;
}

export interface WaitingEntry {
  stepId: number;
  runId: number;
  attempt: number;
  lane: LaneName;
  fairKey: string;
  readyAt: string;
  waitingMs: number;
  load: number;
  pools: string[];
  requirement: PlacementRequirement | null;
  pinnedRunner: string | null;
  verdict: { code: VerdictCode; reason: string; satisfiable: boolean; runner: string | null };
  /** The runner closest to satisfying the placement, and what it lacks (empty: it matches). */
  closest: { runner: string; gaps: string[] } | null;
}

export interface VerdictGroup {
  code: VerdictCode;
  /** Entries of the sample with this verdict. */
  count: number;
  satisfiable: boolean;
  /** The oldest entry's wait and id. */
  oldestWaitingMs: number;
  oldestStepId: number;
  /** The group's entries, oldest first, at most `entriesPerGroup`. */
  entries: WaitingEntry[];
}

export interface ReplicaView {
  id: string;
  site: string | null;
  state: ReplicaState;
  heartbeatAgeMs: number;
  shards: number;
  leader: boolean;
}

export interface DrainView {
  kind: 'runner' | 'group';
  target: string;
  name: string;
  reason: string | null;
  actor: string | null;
  since: string | null;
  ageMs: number | null;
}

/** Triggers in the queue view: what comes due next, and launches accepted but not yet fired (docs/triggers.md). */
export interface TriggersQueueView {
  next: Array<{ id: number; kind: 'schedule' | 'once'; template: string; dueAt: string; dueInMs: number }>;
  waiting: {
    total: number;
    items: Array<{ tickId: number; triggerId: number; kind: string; template: string; dueAt: string; waitingMs: number; reason: string | null }>;
  };
}

export type PostureInForceView = Wire<PostureStory>;

/** The aggregate queue view: `opschain admin queue --json`, `GET /api/admin/queue`, each NDJSON line of `--watch`. */
export interface AdminQueueView {
  at: string;
  /**
   * reason/actor: of the posture holding offers now (the most severe); `holds`: each posture in
   * force with its own reason, actor and time, most severe first (absent from servers before it).
   * `quiesced`: the fleet quiesce's first field name, deprecated, still sent beside `fleetQuiesced`.
   */
  postures: Wire<Omit<FleetPosture, 'holds'>> & { quiesced: boolean; holds?: PostureInForceView[]; drains: DrainView[] };
  lanes: LaneView[];
  /** Per-lane counts are exact below this many ready entries and estimates beyond. */
  exactBound: number;
  deliveries: { windowMs: number; total: number };
  pools: Array<{ name: string; held: number; limit: number }>;
  leases: { total: number; shown: number; items: LeaseView[] };
  replicas: { live: number; total: number; items: ReplicaView[] };
  leader: { replicaId: string; since: string } | null;
  /** Shard n → the replica that holds it now (null: unowned). */
  shards: Array<string | null>;
  runners: RunnerView[];
  waiting: {
    /** Ready entries in all (an estimate when any lane is). */
    ready: number;
    readyEstimated: boolean;
    /** The verdicts are counted over the head of the queue, this many entries. */
    sampleSize: number;
    /** True when the sample does not cover every ready entry: the counts are the head's. */
    sampled: boolean;
    groups: VerdictGroup[];
  };
  /** Always set by buildAdminQueue; absent only in views built by hand. */
  triggers?: TriggersQueueView;
}

export interface BuildOptions {
  acceptExceeding: boolean;
  stalenessMs: number;
  entriesPerGroup?: number;
}

/** The snapshot → the view: lanes, leases, shards, verdict groups, runners; pure, clock from the snapshot. */
export function buildAdminQueue(s: AdminQueueSnapshot, opts: BuildOptions): AdminQueueView {
  const now = s.now.getTime();
  const perGroup = opts.entriesPerGroup ?? 50;
  const runnerNames = new Map(s.runners.map((r) => [r.runnerId, r.runnerName]));

  const lanes: LaneView[] = s.lanes.map((l) => {
    const keys = s.projects.filter((p) => p.lane === l.lane);
    const total = keys.reduce((a, p) => a + p.delivered, 0);
    return {
      lane: LANE_NAMES[l.lane],
      ready: l.ready,
      readyEstimated: l.estimated,
      leased: s.leasedByLane[l.lane] ?? 0,
      oldestReadyAt: l.oldestReadyAt?.toISOString() ?? null,
      oldestAgeMs: l.oldestReadyAt ? Math.max(0, now - l.oldestReadyAt.getTime()) : null,
      projects: keys
        .map((p) => ({ fairKey: p.fairKey, weight: p.weight, delivered: p.delivered, share: total ? p.delivered / total : 0, pass: Math.round((p.delivered * STRIDE_UNIT) / (p.weight > 0 ? p.weight : 1)) }))
        .sort((a, b) => b.delivered - a.delivered || a.fairKey.localeCompare(b.fairKey)),
    };
  });

  const leases: LeaseView[] = s.leases.map((l) => ({
    stepId: l.stepId,
    step: l.stepName,
    runId: l.runId,
    run: l.runName,
    target: l.target,
    project: l.project,
    attempt: l.attempt,
    lane: LANE_NAMES[l.lane],
    holder: l.holder,
    runnerId: l.runnerId,
    runner: l.runnerId ? (runnerNames.get(l.runnerId) ?? l.runnerId) : null,
    delivered: l.deliveredAt !== null,
    acked: l.ackedAt !== null,
    renewed: l.renewedAt !== null,
    executing: l.executing,
    acquiredAt: l.claimedAt.toISOString(),
    expiresAt: l.expiresAt.toISOString(),
    expiresInMs: l.expiresAt.getTime() - now,
    ttlMs: l.ttlMs,
  }));

  const replicas: ReplicaView[] = s.replicas.map((r) => ({
    id: r.id,
    site: r.site,
    state: replicaState(r, opts.stalenessMs),
    heartbeatAgeMs: Math.max(0, r.heartbeatAgeMs),
    shards: s.shardOwners.filter((o) => o === r.id).length,
    leader: s.leader?.replicaId === r.id,
  }));

  const postures = { halted: s.posture.halted, fleetQuiesced: s.posture.fleetQuiesced, systemQuiesced: s.posture.systemQuiesced, reason: s.posture.reason, acceptExceeding: opts.acceptExceeding };
  const fleet = { runners: s.runners, outstandingByRun: s.outstandingByRun, runnerRuns: s.runnerRuns };
  const pools = new Map(s.pools.map((p) => [p.name, { limit: p.limit, held: p.held }]));
  const groups = new Map<VerdictCode, VerdictGroup>();
  for (const e of s.sample) {
    const v = verdict(e, fleet, postures, pools, s.pins);
    const waitingMs = Math.max(0, now - e.readyAt.getTime());
    let g = groups.get(v.code);
    if (!g) groups.set(v.code, (g = { code: v.code, count: 0, satisfiable: v.satisfiable, oldestWaitingMs: waitingMs, oldestStepId: e.stepId, entries: [] }));
    g.count++;
    if (waitingMs > g.oldestWaitingMs) {
      g.oldestWaitingMs = waitingMs;
      g.oldestStepId = e.stepId;
    }
    if (!v.satisfiable) g.satisfiable = false;
    if (g.entries.length < perGroup) {
      const c = closestRunner(e, s.runners);
      g.entries.push({
        stepId: e.stepId,
        runId: e.runId,
        attempt: e.attempt,
        lane: LANE_NAMES[e.lane],
        fairKey: e.fairKey,
        readyAt: e.readyAt.toISOString(),
        waitingMs,
        load: e.load,
        pools: e.pools,
        requirement: e.requirement,
        pinnedRunner: s.pins.get(e.runId) ?? null,
        verdict: { code: v.code, reason: v.reason, satisfiable: v.satisfiable, runner: v.runner ?? null },
        closest: c ? { runner: c.runner.runnerName || c.runner.runnerId, gaps: c.gaps } : null,
      });
    }
  }
  for (const g of groups.values()) g.entries.sort((a, b) => b.waitingMs - a.waitingMs || a.stepId - b.stepId);
  const ready = s.lanes.reduce((a, l) => a + l.ready, 0);
  const readyEstimated = s.lanes.some((l) => l.estimated);

  return {
    at: s.now.toISOString(),
    postures: {
      halted: s.posture.halted,
      fleetQuiesced: s.posture.fleetQuiesced,
      quiesced: s.posture.fleetQuiesced,
      systemQuiesced: s.posture.systemQuiesced,
      reason: s.posture.reason,
      actor: s.posture.actor,
      since: s.posture.since.toISOString(),
      holds: s.posture.holds.map((h) => ({ posture: h.posture, reason: h.reason, actor: h.actor, since: h.since.toISOString() })),
      drains: s.drains.map((d) => ({ kind: d.kind, target: d.key, name: d.name, reason: d.reason, actor: d.actor, since: d.at?.toISOString() ?? null, ageMs: d.at ? Math.max(0, now - d.at.getTime()) : null })),
    },
    lanes,
    exactBound: s.exactBound,
    deliveries: { windowMs: s.deliveryWindowMs, total: s.deliveriesTotal },
    pools: s.pools.map((p) => ({ name: p.name, held: p.held, limit: p.limit })),
    leases: { total: s.leasesTotal, shown: leases.length, items: leases },
    replicas: { live: replicas.filter((r) => r.state === 'live').length, total: replicas.length, items: replicas },
    leader: s.leader ? { replicaId: s.leader.replicaId, since: s.leader.since.toISOString() } : null,
    shards: s.shardOwners,
    runners: buildRunners(s.runners, s.now).runners,
    waiting: {
      ready,
      readyEstimated,
      sampleSize: s.sample.length,
      sampled: readyEstimated || s.sample.length < ready,
      groups: VERDICT_CODES.filter((c) => groups.has(c)).map((c) => groups.get(c)!),
    },
    triggers: {
      next: s.triggersDue.map((t) => ({ id: t.id, kind: t.kind, template: t.template, dueAt: t.dueAt.toISOString(), dueInMs: t.dueAt.getTime() - now })),
      waiting: {
        total: s.launchesWaiting.total,
        items: s.launchesWaiting.items.map((t) => ({
          tickId: t.id,
          triggerId: t.triggerId,
          kind: t.kind,
          template: t.template,
          dueAt: t.dueAt.toISOString(),
          waitingMs: Math.max(0, now - t.recordedAt.getTime()),
          reason: t.deferredReason,
        })),
      },
    },
  };
}

/** One line each: the next trigger to come due, and the launches waiting (deferred by a cap, a ceiling or an overlap). */
export function triggerLines(v: AdminQueueView): Array<{ text: string; tone: Tone }> {
  const t = v.triggers;
  if (!t) return [];
  const out: Array<{ text: string; tone: Tone }> = [];
  const next = t.next[0];
  if (next) out.push({ text: `next trigger: ${next.kind} ${next.id} (${next.template}) ${next.dueInMs <= 0 ? 'due now' : `in ${durationText(next.dueInMs)}`}, at ${next.dueAt}`, tone: 'normal' });
  if (t.waiting.total > 0) {
    const oldest = t.waiting.items[0];
    out.push({
      text: `${t.waiting.total} launch${t.waiting.total === 1 ? '' : 'es'} waiting; oldest: ${oldest.kind} ${oldest.triggerId} (${oldest.template}) ${durationText(oldest.waitingMs)}${oldest.reason ? `: ${oldest.reason}` : ''}`,
      tone: 'warn',
    });
  }
  return out;
}

// ---- the tables, shared by `admin queue` and the dashboard's panes -------------------------------

/** Expiry tone: yellow under a third of the TTL, red past it. */
export function expiryTone(l: Pick<LeaseView, 'expiresInMs' | 'ttlMs'>): Tone {
  if (l.expiresInMs <= 0) return 'bad';
  if (l.ttlMs > 0 && l.expiresInMs < l.ttlMs / 3) return 'warn';
  return 'ok';
}

export function ageTone(ms: number | null): Tone {
  if (ms === null) return 'muted';
  if (ms >= 15 * 60_000) return 'bad';
  if (ms >= 60_000) return 'warn';
  return 'normal';
}

export function lanesTable(v: AdminQueueView): CellTable {
  return {
    head: ['lane', 'ready', 'leased', 'oldest'],
    rows: v.lanes.map((l) => [text(l.lane, 'accent'), count(l.ready, l.ready ? 'normal' : 'muted', l.readyEstimated), count(l.leased, l.leased ? 'normal' : 'muted'), age(l.oldestAgeMs, ageTone(l.oldestAgeMs))]),
  };
}

export function projectsTable(v: AdminQueueView): CellTable {
  return {
    head: ['lane', 'project', 'weight', 'pass', 'share'],
    rows: v.lanes.flatMap((l) =>
      l.projects.map((p) => [text(l.lane, 'muted'), text(p.fairKey, 'accent'), { value: p.weight, unit: 'load', tone: 'normal' } as Cell, count(p.pass, 'muted'), text(`${Math.round(p.share * 100)}%`)]),
    ),
  };
}

/** A lease's stage: claimed → offered → acked → running (renewed). */
export function leaseStage(l: LeaseView): { value: string; tone: Tone } {
  if (!l.delivered) return { value: 'claimed', tone: 'muted' };
  if (l.executing || l.renewed) return { value: 'running', tone: 'ok' };
  if (l.acked) return { value: 'acked', tone: 'ok' };
  return { value: 'offered', tone: 'warn' };
}

export function leasesTable(v: AdminQueueView): CellTable {
  return {
    head: ['step', 'run', 'target', 'runner', 'holder', 'stage', 'acquired', 'expires in'],
    rows: v.leases.items.map((l) => {
      const st = leaseStage(l);
      return [
        text(`${l.stepId}${l.step ? ` ${l.step}` : ''}`),
        text(`${l.runId}${l.run ? ` ${l.run}` : ''}`, 'accent'),
        text(l.target ?? '-', l.target ? 'normal' : 'muted'),
        text(l.runner ?? '-', l.runner ? 'normal' : 'muted'),
        text(l.holder, 'muted'),
        text(st.value, st.tone),
        age(Date.parse(v.at) - Date.parse(l.acquiredAt), 'muted'),
        duration(l.expiresInMs, expiryTone(l)),
      ];
    }),
  };
}

export function verdictsTable(v: AdminQueueView): CellTable {
  return {
    head: ['verdict', 'entries', 'oldest', 'oldest step'],
    rows: v.waiting.groups.map((g) => [
      text(g.code, g.satisfiable ? (g.code === 'waiting_for_tick' ? 'ok' : 'warn') : 'bad'),
      count(g.count, 'normal', v.waiting.sampled),
      age(g.oldestWaitingMs, ageTone(g.oldestWaitingMs)),
      text(String(g.oldestStepId), 'muted'),
    ]),
  };
}

export function replicasTable(v: AdminQueueView): CellTable {
  const tone = (s: ReplicaState): Tone => (s === 'live' ? 'ok' : s === 'quiesced' ? 'warn' : s === 'dead' ? 'bad' : 'muted');
  return {
    head: ['replica', 'state', 'shards', 'heartbeat', 'leader'],
    rows: v.replicas.items.map((r) => [text(r.id, 'accent'), text(r.state, tone(r.state)), count(r.shards), age(r.heartbeatAgeMs, r.heartbeatAgeMs > 15_000 ? 'bad' : 'muted'), text(r.leader ? 'leader' : '', 'accent')]),
  };
}

/** The posture banners an operator must not miss, most severe first. */
export function postureBanners(v: AdminQueueView): Array<{ text: string; tone: Tone }> {
  const out: Array<{ text: string; tone: Tone }> = [];
  const p = v.postures;
  // Each banner tells its own posture's story; the shared reason only when a server sent no stories.
  const story = (posture: PostureInForceView['posture']) => {
    const h = p.holds?.find((x) => x.posture === posture);
    if (!h) return `${p.reason ? `: ${p.reason}` : ''}${p.actor ? ` (${p.actor})` : ''}`;
    return `${h.reason ? `: ${h.reason}` : ''} (${h.actor} since ${h.since})`;
  };
  if (p.halted) out.push({ text: `PLATFORM HALTED${story('halted')}`, tone: 'bad' });
  if (p.systemQuiesced) out.push({ text: `SYSTEM QUIESCED${story('system_quiesced')}`, tone: 'warn' });
  if (p.fleetQuiesced) out.push({ text: `FLEET QUIESCED${story('quiesced')}`, tone: 'warn' });
  const runners = p.drains.filter((d) => d.kind === 'runner').length;
  const groups = p.drains.filter((d) => d.kind === 'group');
  if (runners) out.push({ text: `${runners} runner${runners === 1 ? '' : 's'} drained`, tone: 'warn' });
  if (groups.length) out.push({ text: `group${groups.length === 1 ? '' : 's'} drained: ${groups.map((g) => g.name).join(', ')}`, tone: 'warn' });
  return out;
}

/** Narrows the view to one project, run or runner (the dashboard's `/`): matched by substring. */
export function filterAdminQueue(v: AdminQueueView, filter: string): AdminQueueView {
  const f = filter.trim().toLowerCase();
  if (!f) return v;
  const has = (...xs: Array<string | number | null | undefined>) => xs.some((x) => x !== null && x !== undefined && String(x).toLowerCase().includes(f));
  const items = v.leases.items.filter((l) => has(l.project, l.run, l.runId, l.runner, l.runnerId, l.target));
  const groups = v.waiting.groups
    .map((g) => ({ ...g, entries: g.entries.filter((e) => has(e.fairKey, e.runId, e.pinnedRunner, e.verdict.runner)) }))
    .map((g) => ({ ...g, count: g.entries.length }))
    .filter((g) => g.count > 0);
  return {
    ...v,
    lanes: v.lanes.map((l) => ({ ...l, projects: l.projects.filter((p) => has(p.fairKey)) })),
    leases: { total: items.length, shown: items.length, items },
    runners: v.runners.filter((r) => has(r.name, r.id, r.group)),
    waiting: { ...v.waiting, groups },
  };
}
