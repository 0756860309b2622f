import { parseDuration } from '../../core/duration.js';
import type { Wire } from '../../core/wire.js';
import { POSTURE_ACTIONS } from '../../core/postures.js';
import { Invalid } from '../../errors.js';
import { auditRecord } from '../../store/audit.js';
import { storeNow } from '../../store/pool.js';
import { withTransaction, type Pool, type PoolClient } from '../../store/pool.js';
import { posturesInForceRead, postureRead, postureSet, type FleetPosture, type PostureField, type PostureInForce } from '../../store/posture.js';

/** Bad input to a lever: nothing was written. */
export class LeverInputError extends Invalid {
  constructor(message: string) {
    super(message);
    this.name = 'LeverInputError';
  }
}

export type PostureInForceJson = Wire<Omit<PostureInForce, 'source'>>;

export type PostureJson = Wire<Omit<FleetPosture, 'holds'>> & {
  /** @deprecated The fleet quiesce's first field name, still sent beside `fleetQuiesced` (docs/levers.md). */
  quiesced: boolean;
  /** Each posture in force with who pulled it, why and until when. */
  holds: PostureInForceJson[];
};

export interface PostureLeverResult {
  posture: PostureJson;
  /** Whether any posture changed (false: it already was so; the lever is idempotent). */
  changed: boolean;
  /** The postures this call put in force or lifted. */
  applied: PostureField[];
  /** True when an already-held posture got a new --until. */
  untilMoved?: boolean;
}

/** `--until`: a duration from now (`3s`, `2h30m`) or an absolute ISO-8601 time with a zone. */
export type Until = { afterMs: number } | { at: Date };

export function parseUntil(text: string): Until {
  const ms = parseDuration(text);
  if (ms !== undefined) {
    if (ms <= 0) throw new LeverInputError(`--until: expected a positive duration, got ${JSON.stringify(text)}`);
    return { afterMs: ms };
  }
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/.test(text.trim())) {
    const at = new Date(text.trim());
    if (!Number.isNaN(at.getTime())) return { at };
  }
  throw new LeverInputError(`--until: expected a duration (30s, 2h, 1d) or an ISO time with a zone (2026-12-01T18:00:00Z), got ${JSON.stringify(text)}`);
}

/**
 * Pulls or lifts fleet-wide postures: fleet quiesce (no offers; work in flight continues),
 * platform halt (no offers, expiry sweep held) and system quiesce (no offers, expiry sweep keeps
 * running). One durable row every replica reads each tick; each change, its hold row (reason,
 * actor, until) and its audit row commit together. Lifting takes several fields at once
 * (`admin platform resume` lifts halt and system quiesce).
 */
export async function postureLever(
  pool: Pool,
  p: { fields: PostureField[]; value: boolean; reason?: string; until?: Until; actor: string; source?: string },
): Promise<PostureLeverResult> {
  if (p.until && !p.value) throw new LeverInputError('--until: only a posture being put in force can have an expiry');
  if (p.reason !== undefined && p.reason.length > 1000) throw new LeverInputError('--reason: at most 1000 characters');
  return withTransaction(pool, async (client) => {
    let until: Date | null | undefined;
    if (p.until) {
      const now = await storeNow(client);
      until = 'afterMs' in p.until ? new Date(now.getTime() + p.until.afterMs) : p.until.at;
      if (until.getTime() <= now.getTime()) throw new LeverInputError(`--until: ${until.toISOString()} is not in the future (store time ${now.toISOString()})`);
    }
    const applied: PostureField[] = [];
    let untilMoved = false;
    // One audit row per action of this call: `platform resume` lifting a halt and a system
    // quiesce is one lever pulled, with each lifted posture's story in the row.
    const changes = new Map<string, { target: string; postures: PostureField[]; held: Array<{ posture: PostureField; since: string | null; by: string | null; reason: string | null }> }>();
    for (const field of p.fields) {
      const r = await postureSet(client, { field, value: p.value, reason: p.reason ?? null, actor: p.actor, source: p.source ?? null, until });
      const action = POSTURE_ACTIONS[field];
      if (r.changed) {
        applied.push(field);
        const name = p.value ? action.on : action.off;
        const change = changes.get(name) ?? { target: action.target, postures: [], held: [] };
        change.postures.push(field);
        change.held.push({ posture: field, since: r.before?.since.toISOString() ?? null, by: r.before?.actor ?? null, reason: r.before?.reason ?? null });
        changes.set(name, change);
      } else if (r.untilChanged) {
        untilMoved = true;
        await auditRecord(client, { actor: p.actor, action: `${action.on}.until`, target: action.target, source: p.source, detail: { posture: field, reason: p.reason ?? null, until: until?.toISOString() ?? null, previous_until: r.before?.until?.toISOString() ?? null } });
      }
    }
    for (const [action, c] of changes) {
      const first = c.held[0];
      await auditRecord(client, {
        actor: p.actor,
        action,
        target: c.target,
        source: p.source,
        detail: {
          posture: c.postures.join(','),
          postures: c.postures,
          reason: p.reason ?? null,
          until: until?.toISOString() ?? null,
          ...(p.value ? {} : { held_since: first.since, held_by: first.by, held: c.held }),
        },
      });
    }
    const posture = await postureJson(client, await postureRead(client));
    return { changed: applied.length > 0, applied, posture, ...(untilMoved ? { untilMoved } : {}) };
  });
}

/** The posture flags and every hold in force, as levers, status and the API report them. */
export async function postureStatus(db: Pool | PoolClient): Promise<PostureJson> {
  return postureJson(db, await postureRead(db));
}

async function postureJson(db: Pool | PoolClient, p: FleetPosture): Promise<PostureJson> {
  const holds = await posturesInForceRead(db);
  return {
    fleetQuiesced: p.fleetQuiesced,
    quiesced: p.fleetQuiesced,
    halted: p.halted,
    systemQuiesced: p.systemQuiesced,
    reason: p.reason,
    actor: p.actor,
    since: p.since.toISOString(),
    holds: holds.map(inForceJson),
  };
}

export const inForceJson = (h: PostureInForce): PostureInForceJson => ({ posture: h.posture, reason: h.reason, actor: h.actor, since: h.since.toISOString(), until: h.until?.toISOString() ?? null });

