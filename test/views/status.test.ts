import { describe, expect, it } from 'vitest';
import type { AdminStatus } from '../../src/ops/domain/status.js';
import { postureBanners } from '../../src/views/admin-queue.js';
import { ageText, shardRanges, statusRows, statusSummary } from '../../src/views/status.js';
import { busyView } from '../tui/fixtures.js';

describe('admin status view', () => {
  it('writes shard sets as ranges', () => {
    expect(shardRanges([])).toBe('');
    expect(shardRanges([5])).toBe('5');
    expect(shardRanges([8, 0, 1, 2, 5, 7])).toBe('0-2,5,7-8');
  });

  it('writes ages the way an operator reads them', () => {
    expect(ageText(3_210)).toBe('3.2s');
    expect(ageText(250_000)).toBe('4m10s');
    expect(ageText(7_500_000)).toBe('2h05m');
  });

  it('lists live replicas first and summarises leader, shards and posture', () => {
    const base = { host: 'h', version: '0.1.0', httpAddress: null, startedAt: '', heartbeatAt: '' };
    const status: AdminStatus = {
      at: '',
      replicas: [
        { ...base, id: 'b-dead', site: null, heartbeatAgeMs: 60_000, state: 'dead', shards: [], leader: false },
        { ...base, id: 'a-live', site: 'dc1', heartbeatAgeMs: 1_000, state: 'live', shards: [0, 1, 2], leader: true },
      ],
      leader: { replicaId: 'a-live', token: 7, since: '', expiresAt: '' },
      shards: { total: 64, owned: 3, unowned: Array.from({ length: 61 }, (_, i) => i + 3) },
      postures: {
        fleetQuiesced: false,
        quiesced: false,
        halted: true,
        systemQuiesced: false,
        reason: 'incident 42',
        actor: 'ops',
        since: '',
        holds: [{ posture: 'halted', reason: 'incident 42', actor: 'ops', since: '2026-12-01T12:00:00.000Z', until: '2026-12-01T13:00:00.000Z' }],
      },
      stalenessMs: 15_000,
    };
    expect(statusRows(status).map((r) => [r.replica, r.state, r.shards, r.leader])).toEqual([
      ['a-live', 'live', '3 (0-2)', 'leader'],
      ['b-dead', 'dead', '0', ''],
    ]);
    expect(statusSummary(status)).toEqual(['leader: a-live (token 7)', 'shards owned: 3/64, unowned: 3-63', 'fleet posture: PLATFORM HALTED by ops since 2026-12-01T12:00:00.000Z until 2026-12-01T13:00:00.000Z: incident 42']);
  });
});

describe('the admin queue banners', () => {
  it('name a system quiesce between a halt and a fleet quiesce', () => {
    const v = busyView();
    v.postures = { ...v.postures, systemQuiesced: true, fleetQuiesced: true, quiesced: true, reason: 'store upgrade', actor: 'cli:alice' };
    expect(postureBanners(v).map((b) => b.text)).toEqual(['SYSTEM QUIESCED: store upgrade (cli:alice)', 'FLEET QUIESCED: store upgrade (cli:alice)']);
  });
});
