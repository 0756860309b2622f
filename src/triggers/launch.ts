import type { EventEmitter } from 'node:events';
import { cronNext, cronTicks } from '../core/cron.js';
import { payloadSets } from '../core/triggers.js';
import type { Logger } from '../logger.js';
import { runFileLoad, RunFileInvalid } from '../orchestrator/runfile.js';
import { runSubmitIn } from '../orchestrator/submit.js';
import { withTransaction, type Pool } from '../store/pool.js';
import {
  deliveriesClaim,
  deliveriesOfDisabled,
  deliveryPayload,
  launchDeferred,
  launchesPending,
  launchFired,
  launchLock,
  launchProbe,
  launchSettled,
  missedDecide,
  missedLatest,
  missedLock,
  oneShotsClaim,
  scheduleAdvance,
  schedulesDueLock,
  templateLatest,
  templateLoad,
  templateLock,
  ticksInsert,
  runTriggerSet,
  type LaunchProbe,
  type TickInsert,
} from '../store/triggers.js';

/** Built-in cadences of the launch loop (ADR-0056). */
export interface LaunchTiming {
  /** Each source claims at most this many rows per pass. */
  batch: number;
  /** The longest sleep between probes: a row written on any replica is seen within it. */
  probeIntervalMs: number;
  /** A deferred launch is retried this long after (sooner when a run of its template finishes). */
  discoveryIntervalMs: number;
  /** Most ticks of one schedule recorded in one pass when it is far behind. */
  maxTicksPerSchedule: number;
}

export const DEFAULT_LAUNCH_TIMING: LaunchTiming = { batch: 32, probeIntervalMs: 2_000, discoveryIntervalMs: 5 * 60_000, maxTicksPerSchedule: 1_000 };

interface Hold { template: string; retryAt: number; reason: string }

/**
 * Rows that stay due but cannot go yet, held in memory with a retry time and left out of the
 * probe until then: launches deferred by a cap, a ceiling or a queued overlap, and deliveries
 * of a disabled webhook (settled by housekeeping). A finishing run of a template releases that
 * template's launches; a wake (`admin reconcile`) releases everything.
 */
export class LaunchHolds {
  readonly ticks = new Map<number, Hold>();
  readonly deliveries = new Map<number, number>();

  releaseTemplate(template: string): number {
    let n = 0;
    for (const [id, h] of this.ticks) {
      if (h.template !== template) continue;
      this.ticks.delete(id);
      n++;
    }
    return n;
  }

  releaseAll(): number {
    const n = this.ticks.size + this.deliveries.size;
    this.ticks.clear();
    this.deliveries.clear();
    return n;
  }

  /** Drops the holds whose retry time has come; returns how many. */
  expire(nowMs: number): number {
    let n = 0;
    for (const [id, h] of this.ticks) {
      if (h.retryAt > nowMs) continue;
      this.ticks.delete(id);
      n++;
    }
    for (const [id, at] of this.deliveries) {
      if (at > nowMs) continue;
      this.deliveries.delete(id);
      n++;
    }
    return n;
  }

  earliestRetry(): number | undefined {
    let min: number | undefined;
    for (const h of this.ticks.values()) min = min === undefined ? h.retryAt : Math.min(min, h.retryAt);
    for (const at of this.deliveries.values()) min = min === undefined ? at : Math.min(min, at);
    return min;
  }
}

export interface LaunchDeps {
  pool: Pool;
  log: Logger;
  holds: LaunchHolds;
  timing: LaunchTiming;
  /** Checked at the start of every pass: only the leader fires. */
  isLeader: () => boolean;
  events?: EventEmitter;
}

export interface LaunchFiring { tickId: number; triggerId: number; runId: number; template: string; version: number }

/** What one pass did; the payload of `launch:pass`. */
export interface LaunchReport {
  leader: boolean;
  now: Date | null;
  halted: boolean;
  /** How long the loop sleeps before the next pass (0: pass again at once). */
  sleepMs: number;
  /** The earliest due time the probe saw (after this pass's own work, the next pass re-probes). */
  nextDueAt: Date | null;
  claimed: { oneShots: number; deliveries: number; schedules: number; missed: number; launches: number };
  fired: LaunchFiring[];
  deferred: Array<{ tickId: number; reason: string }>;
  skipped: number[];
  failed: Array<{ tickId: number; reason: string }>;
  /** Ticks recorded as missed (halt, or a schedule behind by more than one tick). */
  missed: number;
  /** A source hit its per-pass cap: another pass follows at once. */
  capped: boolean;
}

const earliest = (dates: Array<Date | null | undefined>): Date | null => {
  let min: Date | null = null;
  for (const d of dates) if (d && (!min || d.getTime() < min.getTime())) min = d;
  return min;
};

const due = (d: Date | null, now: Date) => d !== null && d.getTime() <= now.getTime();

/**
 * One pass of the launch loop, on the leader:
 *
 *   probe → (halted: record due schedule ticks as missed, fire nothing)
 *         → catch-up of missed ticks → one-shots → webhook deliveries → schedules → launches
 *
 * The probe asks for the earliest due time of each source (one partial-index lookup each). Each
 * source claims at most `batch` rows with a compare-and-set, so two loops never fire one row
 * twice; claimed rows become ledger ticks, and a pending tick is a launch: the launch stage locks
 * it, applies the trigger's overlap policy and the template's caps (deferred launches are held in
 * memory), creates the run and marks the tick fired, all in one transaction.
 *
 * `now` is for tests (a fixed time for every comparison, in SQL too); production passes nothing
 * and the database's clock decides. The returned sleepMs is 0 when the pass did work or a source
 * was capped, else the time to the earliest due row (or held row's retry), at most the probe interval.
 */
export async function launchOnce(deps: LaunchDeps, now?: Date): Promise<LaunchReport> {
  const { timing, holds } = deps;
  const report: LaunchReport = {
    leader: deps.isLeader(),
    now: null,
    halted: false,
    sleepMs: timing.probeIntervalMs,
    nextDueAt: null,
    claimed: { oneShots: 0, deliveries: 0, schedules: 0, missed: 0, launches: 0 },
    fired: [],
    deferred: [],
    skipped: [],
    failed: [],
    missed: 0,
    capped: false,
  };
  if (!report.leader) return emit(deps, report);

  let probe = await launchProbe(deps.pool, { now, heldTicks: [...holds.ticks.keys()], heldDeliveries: [...holds.deliveries.keys()] });
  const released = holds.expire(probe.now.getTime());
  if (released > 0) probe = await launchProbe(deps.pool, { now, heldTicks: [...holds.ticks.keys()], heldDeliveries: [...holds.deliveries.keys()] });
  report.now = probe.now;
  report.halted = probe.halted;
  const at = probe.now;
  const tNow = now;

  let progress = false;
  if (probe.halted) {
    // Nothing fires during a halt; schedule ticks that come due are recorded as missed.
    if (due(probe.schedule, at)) progress = (await schedulesPass(deps, report, at, tNow, true)) || progress;
  } else {
    if (due(probe.missed, at)) progress = (await catchUpPass(deps, report, tNow)) || progress;
    if (due(probe.oneShot, at)) progress = (await oneShotsPass(deps, report, tNow)) || progress;
    if (due(probe.delivery, at)) progress = (await deliveriesPass(deps, report, at, tNow)) || progress;
    if (due(probe.schedule, at)) progress = (await schedulesPass(deps, report, at, tNow, false)) || progress;
    if (progress || due(probe.launch, at)) progress = (await launchesPass(deps, report, at, tNow)) || progress;
  }

  report.nextDueAt = nextDue(probe);
  if (report.capped || progress) report.sleepMs = 0;
  else {
    const retry = holds.earliestRetry();
    const candidates = [report.nextDueAt?.getTime(), retry].filter((v): v is number => v !== undefined);
    const wake = candidates.length ? Math.min(...candidates) : Infinity;
    // Something due that this pass could not take (another loop holds it locked): look again shortly.
    report.sleepMs = Math.max(wake <= at.getTime() ? 50 : 0, Math.min(timing.probeIntervalMs, wake - at.getTime()));
  }
  return emit(deps, report);
}

function nextDue(probe: LaunchProbe): Date | null {
  if (probe.halted) return probe.schedule;
  return earliest([probe.oneShot, probe.schedule, probe.delivery, probe.launch, probe.missed]);
}

function emit(deps: LaunchDeps, report: LaunchReport): LaunchReport {
  deps.events?.emit('launch:pass', report);
  return report;
}

async function oneShotsPass(deps: LaunchDeps, report: LaunchReport, now: Date | undefined): Promise<boolean> {
  const n = await withTransaction(deps.pool, async (client) => {
    const claimed = await oneShotsClaim(client, { now, limit: deps.timing.batch });
    await ticksInsert(
      client,
      claimed.map((o) => ({ triggerId: o.id, kind: 'once', template: o.template, dueAt: o.fireAt, outcome: 'pending', overlap: 'allow', sets: o.sets })),
      now,
    );
    return claimed.length;
  });
  report.claimed.oneShots += n;
  if (n >= deps.timing.batch) report.capped = true;
  return n > 0;
}

async function deliveriesPass(deps: LaunchDeps, report: LaunchReport, at: Date, now: Date | undefined): Promise<boolean> {
  const n = await withTransaction(deps.pool, async (client) => {
    const claimed = await deliveriesClaim(client, { now, limit: deps.timing.batch });
    await ticksInsert(
      client,
      claimed.map((d): TickInsert => {
        const mapped = payloadSets(d.payload, d.maps);
        const base = { triggerId: d.webhookId, kind: 'webhook' as const, template: d.template, dueAt: d.receivedAt, overlap: 'allow' as const, deliveryId: d.id };
        if (mapped.problems.length) return { ...base, outcome: 'failed', sets: d.sets, detail: mapped.problems.join('; ') };
        return { ...base, outcome: 'pending', sets: [...d.sets, ...mapped.sets] };
      }),
      now,
    );
    return claimed.length;
  });
  report.claimed.deliveries += n;
  let held = 0;
  if (n >= deps.timing.batch) report.capped = true;
  else {
    // What is left due belongs to disabled webhooks: hold it until housekeeping settles it.
    for (const id of await deliveriesOfDisabled(deps.pool, { now, limit: 1000 })) {
      deps.holds.deliveries.set(id, at.getTime() + deps.timing.discoveryIntervalMs);
      held++;
    }
  }
  // Newly held rows change what the probe sees: look again at once rather than after a short wait.
  return n > 0 || held > 0;
}

async function schedulesPass(deps: LaunchDeps, report: LaunchReport, at: Date, now: Date | undefined, halted: boolean): Promise<boolean> {
  const n = await withTransaction(deps.pool, async (client) => {
    const dueRows = await schedulesDueLock(client, { now, limit: deps.timing.batch });
    for (const s of dueRows) {
      const { ticks, more } = cronTicks(s.cron, s.tz, s.nextDueAt, at, deps.timing.maxTicksPerSchedule);
      if (ticks.length === 0) ticks.push(s.nextDueAt);
      const base = { triggerId: s.id, kind: 'schedule' as const, template: s.template, overlap: s.overlap, sets: s.sets };
      const rows: TickInsert[] = ticks.map((t, i) => {
        const last = i === ticks.length - 1;
        const note = more && last ? `; more ticks up to ${at.toISOString()} were not listed` : '';
        if (halted) return { ...base, dueAt: t, outcome: 'missed', missed: true, detail: `came due during a platform halt${note}` };
        if (last) return { ...base, dueAt: t, outcome: 'pending' };
        // Behind by more than one tick (no leader was firing): the catch-up policy decides now.
        const detail = 'came due while no leader was firing';
        if (s.catchUp === 'all') return { ...base, dueAt: t, outcome: 'pending', missed: true, catchUp: 'all: fired late', detail };
        return { ...base, dueAt: t, outcome: 'missed', missed: true, catchUp: s.catchUp === 'last' ? 'last: a later tick fired instead' : 'none: not fired', detail };
      });
      const recorded = await ticksInsert(client, rows, now);
      report.missed += recorded.filter((r) => r.outcome === 'missed').length;
      await scheduleAdvance(client, { id: s.id, from: s.nextDueAt, to: cronNext(s.cron, s.tz, at) });
    }
    return dueRows.length;
  });
  report.claimed.schedules += n;
  if (n >= deps.timing.batch) report.capped = true;
  return n > 0;
}

/** After a halt: each schedule's missed ticks are relaunched (`all`), the latest one is (`last`), or none are. */
async function catchUpPass(deps: LaunchDeps, report: LaunchReport, now: Date | undefined): Promise<boolean> {
  const n = await withTransaction(deps.pool, async (client) => {
    const missed = await missedLock(client, { limit: deps.timing.batch });
    const latest = await missedLatest(client, [...new Set(missed.filter((m) => m.policy === 'last').map((m) => m.triggerId))]);
    for (const m of missed) {
      if (m.policy === 'all') await missedDecide(client, { id: m.id, relaunch: true, catchUp: 'all: fired on resume', now });
      else if (m.policy === 'last' && latest.get(m.triggerId) === m.id) await missedDecide(client, { id: m.id, relaunch: true, catchUp: 'last: fired on resume', now });
      else if (m.policy === 'last') await missedDecide(client, { id: m.id, relaunch: false, catchUp: 'last: a later tick fired instead', now });
      else await missedDecide(client, { id: m.id, relaunch: false, catchUp: m.policy === null ? 'none: the schedule is gone' : 'none: not fired', now });
    }
    return missed.length;
  });
  report.claimed.missed += n;
  if (n >= deps.timing.batch) report.capped = true;
  return n > 0;
}

async function launchesPass(deps: LaunchDeps, report: LaunchReport, at: Date, now: Date | undefined): Promise<boolean> {
  const pending = await launchesPending(deps.pool, { now, limit: deps.timing.batch, exclude: [...deps.holds.ticks.keys()] });
  report.claimed.launches += pending.length;
  if (pending.length >= deps.timing.batch) report.capped = true;
  let progress = false;
  for (const candidate of pending) {
    const result = await withTransaction(deps.pool, async (client) => {
      const tick = await launchLock(client, candidate.id);
      if (!tick) return { kind: 'gone' as const };
      const template = await templateLatest(client, tick.template);
      if (!template) {
        await launchSettled(client, { id: tick.id, outcome: 'failed', detail: `template ${tick.template} no longer exists` });
        return { kind: 'failed' as const, reason: `template ${tick.template} no longer exists` };
      }
      await templateLock(client, template.name);
      const load = await templateLoad(client, { template: template.name, triggerId: tick.triggerId, tickId: tick.id, now });
      const busy = load.triggerRunning.length > 0 ? `run ${load.triggerRunning[0]} of this trigger is still running` : load.olderPending !== null ? `launch ${load.olderPending} of this trigger is still waiting` : undefined;
      if (busy && tick.overlap === 'skip') {
        await launchSettled(client, { id: tick.id, outcome: 'skipped_overlap', detail: `overlap skip: ${busy}` });
        return { kind: 'skipped' as const };
      }
      let wait: string | undefined;
      if (busy && tick.overlap === 'queue') wait = `overlap queue: ${busy}`;
      else if (template.maxConcurrentRuns !== null && load.running >= template.maxConcurrentRuns) wait = `max_concurrent_runs ${template.maxConcurrentRuns} reached (${load.running} running)`;
      else if (template.dailyCeiling !== null && load.today >= template.dailyCeiling) wait = `daily_ceiling ${template.dailyCeiling} reached (${load.today} runs today, UTC)`;
      if (wait) {
        await launchDeferred(client, { id: tick.id, reason: wait, now });
        return { kind: 'deferred' as const, reason: wait, template: template.name };
      }
      let payload: string | null = null;
      if (tick.deliveryId !== null) payload = (await deliveryPayload(client, tick.deliveryId)) ?? null;
      let file;
      try {
        file = runFileLoad(template.source, tick.sets);
      } catch (err) {
        if (!(err instanceof RunFileInvalid)) throw err;
        const reason = `template ${template.name} v${template.version} with this trigger's values: ${err.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`;
        await launchSettled(client, { id: tick.id, outcome: 'failed', detail: reason });
        return { kind: 'failed' as const, reason };
      }
      const { runId } = await runSubmitIn(client, file, { actor: `trigger:${tick.triggerId}`, source: `trigger ${tick.kind} ${tick.triggerId}` });
      await runTriggerSet(client, { runId, template: template.name, version: template.version, triggerId: tick.triggerId, payload });
      await launchFired(client, { id: tick.id, runId, now });
      return { kind: 'fired' as const, firing: { tickId: tick.id, triggerId: tick.triggerId, runId, template: template.name, version: template.version } };
    });
    if (result.kind === 'fired') {
      report.fired.push(result.firing);
      progress = true;
    } else if (result.kind === 'deferred') {
      deps.holds.ticks.set(candidate.id, { template: result.template, retryAt: at.getTime() + deps.timing.discoveryIntervalMs, reason: result.reason });
      report.deferred.push({ tickId: candidate.id, reason: result.reason });
      progress = true;
    } else if (result.kind === 'skipped') {
      report.skipped.push(candidate.id);
      progress = true;
    } else if (result.kind === 'failed') {
      report.failed.push({ tickId: candidate.id, reason: result.reason });
      progress = true;
    }
  }
  if (report.fired.length) deps.log.info({ fired: report.fired.map((f) => ({ trigger: f.triggerId, run: f.runId })) }, `launched ${report.fired.length} run(s) from triggers`);
  return progress;
}
