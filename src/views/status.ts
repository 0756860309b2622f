import type { AdminStatus } from '../ops/domain/status.js';

/** `[0,1,2,5,7,8]` → `0-2,5,7-8`: shard sets read at a glance. */
export function shardRanges(shards: number[]): string {
  const sorted = [...shards].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** Heartbeat age the way an operator reads it: 3.2s, 4m10s, 2h05m. */
export function ageText(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

export interface StatusRow {
  replica: string;
  site: string;
  state: string;
  heartbeat: string;
  shards: string;
  leader: string;
  address: string;
}

/** One row per replica, live ones first, for the table and the dashboard. */
export function statusRows(status: AdminStatus): StatusRow[] {
  const rank = { live: 0, quiesced: 1, dead: 2, stopped: 3 } as const;
  return [...status.replicas]
    .sort((a, b) => rank[a.state] - rank[b.state] || a.id.localeCompare(b.id))
    .map((r) => ({
      replica: r.id,
      site: r.site ?? '',
      state: r.state,
      heartbeat: ageText(r.heartbeatAgeMs),
      shards: r.shards.length ? `${r.shards.length} (${shardRanges(r.shards)})` : '0',
      leader: r.leader ? 'leader' : '',
      address: r.httpAddress ?? '',
    }));
}

/** The summary lines under the table. */
export function statusSummary(status: AdminStatus): string[] {
  const p = status.postures;
  const posture = p.holds.length === 0 ? 'normal' : p.holds.map(inForceText).join('; ');
  return [
    `leader: ${status.leader ? `${status.leader.replicaId} (token ${status.leader.token})` : 'none'}`,
    `shards owned: ${status.shards.owned}/${status.shards.total}${status.shards.unowned.length ? `, unowned: ${shardRanges(status.shards.unowned)}` : ''}`,
    `fleet posture: ${posture}`,
  ];
}

const POSTURE_WORDS = { halted: 'PLATFORM HALTED', system_quiesced: 'system quiesced', quiesced: 'fleet quiesced' } as const;

/** `fleet quiesced by alice since 12:00:00Z until 13:00:00Z: deploying`. */
export function inForceText(h: AdminStatus['postures']['holds'][number]): string {
  return `${POSTURE_WORDS[h.posture]} by ${h.actor} since ${h.since}${h.until ? ` until ${h.until}` : ''}${h.reason ? `: ${h.reason}` : ''}`;
}
