import { demandOf, NO_GROUP, UNMATCHED, whatIf, type CapacityState, type Levers } from '../../core/capacity.js';
import { Conflict, Invalid, NotFound } from '../../errors.js';
import { capacityRead } from '../../store/capacity.js';
import { buildFleetDemand, buildFleetWhatIf, type FleetDemandView, type FleetWhatIfView } from '../../views/fleet-demand.js';
import type { OpsContext } from './context.js';

/** A group name demand knows: one that exists, `(none)` or `(unmatched)`. */
function knownGroup(s: CapacityState, g: string, what: string): string {
  if (g === NO_GROUP || g === UNMATCHED || s.groups.has(g) || s.runners.some((r) => r.group === g)) return g;
  throw new NotFound(`${what}: no runner group named ${g} (see opschain groups list)`);
}

/** `fleet demand`: per group, why the ready entries wait (capacity first), the runners' states and the oldest capacity-bound wait. */
export async function fleetDemand(ctx: OpsContext, p: { group?: string; acceptExceeding?: boolean }): Promise<FleetDemandView> {
  const s = await capacityRead(ctx.pool);
  const groups = p.group === undefined ? undefined : [knownGroup(s, p.group, '--group')];
  return buildFleetDemand(s, demandOf(s, { acceptExceeding: p.acceptExceeding ?? ctx.acceptExceeding ?? true }), { groups });
}

/** The input of a what-if: each list is comma-separated text, as it travels in a query string. */
export interface WhatIfInput {
  drain?: string;
  drainGroup?: string;
  undrain?: string;
  undrainGroup?: string;
  /** `P=N,…` */
  pool?: string;
  /** `PROJECT=W,…` */
  weight?: string;
  removeRunner?: string;
  addRunners?: number;
  group?: string;
  /** labels of the added runners, `linux,k=v` */
  label?: string;
  maxLoad?: number;
  /** How many waiting entries to list (default 50). */
  limit?: number;
  acceptExceeding?: boolean;
}

const items = (v: string | undefined) => (v === undefined ? [] : v.split(',').map((x) => x.trim()));

function pairs(v: string | undefined, flag: string, value: (raw: string, key: string) => number): Map<string, number> {
  const out = new Map<string, number>();
  for (const item of items(v)) {
    const m = /^([^=\s]+)=([^=\s]+)$/.exec(item);
    if (!m) throw new Invalid(`${flag} ${item}: expected NAME=VALUE`);
    out.set(m[1], value(m[2], m[1]));
  }
  return out;
}

function resolveRunner(s: CapacityState, ref: string, flag: string): string {
  if (!ref) throw new Invalid(`${flag}: expected a runner id or name`);
  if (s.runners.some((r) => r.runnerId === ref)) return ref;
  const named = s.runners.filter((r) => r.runnerName === ref);
  if (named.length === 0) throw new NotFound(`${flag}: no runner with id or name ${ref}`);
  if (named.length > 1) throw new Conflict(`${flag}: ${named.length} runners are named ${ref}: give the runner id (${named.map((r) => r.runnerId).join(', ')})`, 'ambiguous');
  return named[0].runnerId;
}

/** The levers of the input against this state: every runner, group, pool and project must exist; values well formed. */
export function leversOf(s: CapacityState, p: WhatIfInput): Levers {
  const runners = (v: string | undefined, flag: string) => items(v).map((r) => resolveRunner(s, r, flag));
  const groups = (v: string | undefined, flag: string) => items(v).map((g) => (g === NO_GROUP || g === UNMATCHED ? (() => { throw new Invalid(`${flag}: expected a group name`); })() : knownGroup(s, g, flag)));
  const pools = pairs(p.pool, '--pool', (raw, name) => {
    if (!/^\d+$/.test(raw) || Number(raw) > 1_000_000) throw new Invalid(`--pool ${name}=${raw}: the limit must be an integer 0 to 1000000`);
    if (!s.pools.has(name) && !s.ready.some((e) => e.pools.includes(name))) throw new NotFound(`--pool: no pool named ${name} (see opschain pools list)`);
    return Number(raw);
  });
  const weights = pairs(p.weight, '--weight', (raw, name) => {
    const w = Number(raw);
    if (!/^\d+(\.\d+)?$/.test(raw) || !(w > 0) || w > 1_000_000) throw new Invalid(`--weight ${name}=${raw}: the weight must be a number above 0`);
    if (!s.projects.has(name) && !s.ready.some((e) => e.fairKey === name)) throw new NotFound(`--weight: no project named ${name} (see opschain projects list)`);
    return w;
  });
  let add: Levers['add'] = null;
  if (p.addRunners !== undefined) {
    if (!Number.isSafeInteger(p.addRunners) || p.addRunners < 1 || p.addRunners > 10_000) throw new Invalid(`--add-runners ${p.addRunners}: expected 1 to 10000`);
    if (p.group === undefined) throw new Invalid('--add-runners: name the group the runners join with --group G');
    const labels = items(p.label);
    for (const l of labels) if (!/^[^=\s,]+(=[^=\s,]+)?$/.test(l)) throw new Invalid(`--label ${l}: expected a label or k=v`);
    if (p.maxLoad !== undefined && !(p.maxLoad > 0)) throw new Invalid(`--max-load ${p.maxLoad}: expected a number above 0`);
    add = { count: p.addRunners, group: groups(p.group, '--group')[0], labels, maxLoad: p.maxLoad };
  } else if (p.group !== undefined || p.label !== undefined || p.maxLoad !== undefined) {
    throw new Invalid('--group, --label and --max-load describe the runners of --add-runners N');
  }
  return {
    drain: runners(p.drain, '--drain'),
    drainGroups: groups(p.drainGroup, '--drain-group'),
    undrain: runners(p.undrain, '--undrain'),
    undrainGroups: groups(p.undrainGroup, '--undrain-group'),
    pools,
    weights,
    add,
    remove: runners(p.removeRunner, '--remove-runner'),
  };
}

/** `fleet what-if`: the levers tried against the current queue, fleet and policy through the real planner and verdicts; writes nothing. */
export async function fleetWhatIf(ctx: OpsContext, p: WhatIfInput): Promise<FleetWhatIfView> {
  const limit = p.limit ?? 50;
  if (!Number.isSafeInteger(limit) || limit < 0 || limit > 10_000) throw new Invalid(`limit ${limit}: expected 0 to 10000`);
  const s = await capacityRead(ctx.pool);
  const levers = leversOf(s, p);
  return buildFleetWhatIf(s, whatIf(s, levers, { acceptExceeding: p.acceptExceeding ?? ctx.acceptExceeding ?? true }), { limit });
}
