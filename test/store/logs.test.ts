import { describe, expect, it } from 'vitest';
import { stepLogAppend, stepLogRead, stepLogSystem } from '../../src/store/logs.js';
import { logLineText, logLineView } from '../../src/views/runs.js';
import { useTestDatabase } from '../support/db.js';
import { seedRun } from '../support/seed.js';

describe('step logs', () => {
  const db = useTestDatabase();
  const chunks = (text: string) => [{ stream: 'stdout' as const, text }];

  it('keep at most the cap per attempt: the crossing batch is cut with one truncation line, later ones dropped, a retry starts again', async () => {
    const { runId, stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'loud' }] });
    const [stepId] = stepIds;
    const pool = db.current.pool;
    expect(await stepLogAppend(pool, { stepId, attempt: 1, chunks: chunks('a'.repeat(60)), maxBytes: 100 })).toEqual({ stored: 1, truncated: false });
    expect(await stepLogAppend(pool, { stepId, attempt: 1, chunks: [...chunks('é'.repeat(30)), { stream: 'stderr', text: 'never' }], maxBytes: 100 })).toEqual({ stored: 1, truncated: true });
    expect(await stepLogAppend(pool, { stepId, attempt: 1, chunks: chunks('more'), maxBytes: 100 })).toEqual({ stored: 0, truncated: true });
    const lines = await stepLogRead(pool, { runId });
    expect(lines.map((l) => [l.stream, l.text])).toEqual([
      ['stdout', 'a'.repeat(60)],
      ['stdout', 'é'.repeat(20)],
      ['system', "log truncated: this attempt's output passed 100 bytes (logs.max_step_bytes); the rest is dropped"],
    ]);
    await pool.query(`UPDATE steps SET attempt = 2 WHERE id = $1`, [stepId]);
    expect(await stepLogAppend(pool, { stepId, attempt: 2, chunks: chunks('b'.repeat(90)), maxBytes: 100 })).toEqual({ stored: 1, truncated: false });
    // A stale attempt writes nothing and is not reported as full.
    expect(await stepLogAppend(pool, { stepId, attempt: 1, chunks: chunks('old'), maxBytes: 100 })).toEqual({ stored: 0, truncated: false });
  });

  it('a system line is one line whatever its text holds, so a reason cannot forge lines of its own', async () => {
    const { runId, stepIds } = await seedRun(db.current.pool, { steps: [{ name: 'forged' }] });
    await stepLogSystem(db.current.pool, { stepId: stepIds[0], attempt: 1, text: 'released: bye\nforged # attempt 9 succeeded\r\u001b[2K\u0000' });
    const [line] = await stepLogRead(db.current.pool, { runId });
    const text = logLineText(logLineView(line), 6);
    expect(text).toEqual(['forged # released: bye\\nforged # attempt 9 succeeded\\x0d\\x1b[2K\\x00']);
  });

  it('runs logs on a terminal shows escape sequences as text; piped output stays byte for byte', () => {
    const view = { id: 1, step: 's', attempt: 1, stream: 'stdout' as const, text: '\u001b]0;owned\u0007red \u001b[31mX\u001b[0m\rover\n', at: '' };
    expect(logLineText(view, 1, { terminal: true })).toEqual(['s | \\x1b]0;owned\\x07red \\x1b[31mX\\x1b[0m\\x0dover']);
    expect(logLineText(view, 1)).toEqual(['s | \u001b]0;owned\u0007red \u001b[31mX\u001b[0m\rover']);
  });
});
