/**
 * The chaos tier's fault schedule and workload, derived from one seed: the same seed gives the same
 * faults at the same offsets against the same targets, and the same runs in the same order.
 */

export const FAULT_KINDS = [
  'replica-kill',
  'replica-pause',
  'runner-kill',
  'runner-pause',
  'pg-terminate',
  'store-hang',
  'store-refuse',
  'lost-reply',
  'clock-skew',
  'runner-skew',
  'store-failover',
  'pgbouncer-restart',
  'platform-halt',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export type ReplyPath = 'complete' | 'ack' | 'acquire';

export interface Fault {
  /** Offset from the start of the storm. */
  at: number;
  kind: FaultKind;
  /** Replica or runner index (unused by fleet-wide faults). */
  target: number;
  /** How long the fault holds before it heals (a restart, a SIGCONT, the proxy passing again). */
  durationMs: number;
  /** lost-reply: which answer is lost. */
  path?: ReplyPath;
  /** clock-skew, runner-skew: the replica's or runner's clock offset. */
  skewSeconds?: number;
}

/** mulberry32: small, fast, good enough to pick faults; the same seed always gives the same stream. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface ScheduleParams {
  seed: number;
  durationMs: number;
  replicas: number;
  runners: number;
  stalenessMs: number;
  leaseTtlMs: number;
}

/**
 * Every kind of fault at least once, then more drawn at random, one every ~12 s, spread over the
 * storm with jitter; the platform halt lands in the middle. The failover comes once (the promoted
 * standby has no standby of its own); skews, which restart a process twice, come once each. Durations stay inside what the
 * promise covers: store outages shorter than the lease TTL, pauses past the staleness window (a
 * replica) or the TTL (a runner, so its late writes must be fenced).
 */
export function faultSchedule(p: ScheduleParams): Fault[] {
  const r = rng(p.seed);
  const between = (lo: number, hi: number) => Math.round(lo + r() * (hi - lo));
  const pick = <T>(list: readonly T[]): T => list[Math.floor(r() * list.length)];
  const make = (kind: FaultKind, path?: ReplyPath): Omit<Fault, 'at'> => {
    switch (kind) {
      case 'replica-kill':
        return { kind, target: between(0, p.replicas - 1), durationMs: between(2_000, 6_000) };
      case 'replica-pause':
        return { kind, target: between(0, p.replicas - 1), durationMs: p.stalenessMs + between(3_000, 8_000) };
      case 'runner-kill':
        return { kind, target: between(0, p.runners - 1), durationMs: between(1_000, 4_000) };
      case 'runner-pause':
        // Past the TTL and the next expiry sweep (a coordination tick later), so its late writes meet the fence.
        return { kind, target: between(0, p.runners - 1), durationMs: p.leaseTtlMs + between(10_000, 15_000) };
      case 'store-hang':
      case 'store-refuse':
        return { kind, target: 0, durationMs: Math.min(between(3_000, 8_000), Math.floor(p.leaseTtlMs / 2)) };
      case 'lost-reply':
        return { kind, target: between(0, p.replicas - 1), durationMs: 0, path: path ?? pick(['complete', 'ack', 'acquire'] as const) };
      case 'clock-skew':
        return { kind, target: between(0, p.replicas - 1), durationMs: between(15_000, 30_000), skewSeconds: pick([-90, -30, 30, 90]) };
      case 'runner-skew':
        return { kind, target: between(0, p.runners - 1), durationMs: between(20_000, 40_000), skewSeconds: pick([-90, 90, 300]) };
      case 'pgbouncer-restart':
        return { kind, target: 0, durationMs: between(500, 3_000) };
      case 'platform-halt':
        return { kind, target: 0, durationMs: between(5_000, 10_000) };
      default:
        return { kind, target: 0, durationMs: 0 };
    }
  };
  const base: Array<Omit<Fault, 'at'>> = [];
  for (const kind of FAULT_KINDS) {
    if (kind === 'platform-halt') continue;
    if (kind === 'lost-reply') for (const path of ['complete', 'ack', 'acquire'] as const) base.push(make(kind, path));
    else base.push(make(kind));
  }
  const slots = Math.max(base.length, Math.floor(p.durationMs / 12_000));
  const once: readonly FaultKind[] = ['platform-halt', 'clock-skew', 'runner-skew', 'store-failover'];
  const random = FAULT_KINDS.filter((k) => !once.includes(k));
  while (base.length < slots) base.push(make(pick(random)));
  // Shuffle (Fisher–Yates), then spread over the storm, leaving its first and last 5% quiet.
  for (let i = base.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [base[i], base[j]] = [base[j], base[i]];
  }
  const start = p.durationMs * 0.05;
  const span = p.durationMs * 0.9;
  const step = span / base.length;
  const faults: Fault[] = base.map((f, i) => ({ ...f, at: Math.round(start + i * step + r() * step * 0.5) }));
  faults.push({ ...make('platform-halt'), at: Math.round(p.durationMs / 2) });
  return faults.sort((a, b) => a.at - b.at);
}

/** What every step of the workload does once per execution: the checker counts these lines. */
export const SIDE_EFFECT = 'echo "$OPSCHAIN_RUN_ID $OPSCHAIN_STEP $OPSCHAIN_ATTEMPT $$" >> "$CHAOS_SIDE"';

/** A run of the workload: a DAG, a wide fan-out, pooled steps, or a pinned (run-scoped) chain. */
export function runDefinition(r: () => number, n: number, side: string): Record<string, unknown> {
  const effect = SIDE_EFFECT;
  const cmd = () => {
    const x = r();
    // Mostly quick; some long enough to be renewed (the renew interval is a third of the TTL).
    if (x < 0.7) return effect;
    if (x < 0.93) return `${effect}; sleep 0.${1 + Math.floor(r() * 5)}`;
    if (x < 0.98) return `${effect}; sleep ${1 + Math.floor(r() * 2)}`;
    return `${effect}; sleep ${8 + Math.floor(r() * 4)}`;
  };
  const env = { CHAOS_SIDE: side };
  const kind = r();
  if (kind < 0.3) {
    return { name: `dag-${n}`, project: 'dag', env, steps: { a: { run: cmd() }, b: { run: cmd(), needs: ['a'] }, c: { run: cmd(), needs: ['a'] }, d: { run: cmd(), needs: ['b', 'c'] } } };
  }
  if (kind < 0.6) {
    return { name: `wide-${n}`, project: 'wide', env, steps: Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`w${i}`, { run: cmd() }])) };
  }
  if (kind < 0.8) {
    return { name: `pooled-${n}`, project: 'pooled', env, steps: Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`p${i}`, { run: cmd(), pools: i % 2 ? ['db'] : ['db', 'deploy'] }])) };
  }
  return {
    name: `pinned-${n}`,
    project: 'pinned',
    scope: 'run',
    max_parallel_steps: 2,
    env,
    steps: { build: { run: cmd() }, test: { run: cmd(), needs: ['build'] }, lint: { run: cmd(), needs: ['build'] }, ship: { run: cmd(), needs: ['test', 'lint'] } },
  };
}
