import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { webhookSignature } from '../../src/core/triggers.js';
import { createLogger } from '../../src/logger.js';
import type { ServerHandle } from '../../src/server.js';
import { offerDetails } from '../../src/store/leases.js';
import { deliveryCount } from '../../src/store/triggers.js';
import { DEFAULT_LAUNCH_TIMING, DeferredLaunches, launchOnce } from '../../src/triggers/launch.js';
import { templatePut, triggerShow, webhookAdd, type WebhookCreated } from '../../src/ops/domain/trigger-definitions.js';
import { runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { startTestServer } from '../support/server.js';

const TEMPLATE = `name: deploy\nenv: { GIT_REF: none }\nsteps:\n  show:\n    run: cat "$OPSCHAIN_WEBHOOK_PAYLOAD"\n`;

describe('signed webhooks', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let hook: WebhookCreated;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { webhooks: true } });
    await templatePut(db.current.pool, { text: TEMPLATE, actor: 'test' });
  });
  afterAll(async () => server?.stop());
  beforeEach(async () => {
    hook = await webhookAdd(db.current.pool, { template: 'deploy', maps: ['env.GIT_REF=$.ref'], actor: 'test' });
  });

  const post = (id: number, body: Buffer | string, headers: Record<string, string>) =>
    fetch(`${server.url}/api/hooks/${id}`, { method: 'POST', body: typeof body === 'string' ? body : new Uint8Array(body), headers: { 'content-type': 'application/json', ...headers } });
  const signed = (secret: string, body: Buffer | string, ts = Math.floor(Date.now() / 1000), extra: Record<string, string> = {}) => ({
    'x-opschain-timestamp': String(ts),
    'x-opschain-signature': webhookSignature(secret, String(ts), Buffer.from(body)),
    ...extra,
  });

  it('a valid call answers 202 with the delivery id; the run gets the payload as a file and --map values', async () => {
    const body = JSON.stringify({ ref: 'refs/heads/main', n: 1 });
    const res = await post(hook.id, body, signed(hook.secret, body, undefined, { 'x-opschain-delivery': 'abc-1' }));
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ delivery_id: 'abc-1', webhook: hook.id });
    expect(await deliveryCount(db.current.pool, hook.id)).toBe(1);

    const report = await launchOnce({ pool: db.current.pool, log: createLogger('silent', { pretty: false }), deferred: new DeferredLaunches(), timing: DEFAULT_LAUNCH_TIMING, isLeader: () => true });
    expect(report.claimed.deliveries).toBe(1);
    expect(report.fired).toHaveLength(1);
    const runId = report.fired[0].runId;
    const { rows } = await db.current.pool.query(`SELECT s.id, s.env FROM steps s WHERE s.run_id = $1`, [runId]);
    expect(rows[0].env).toEqual({ GIT_REF: 'refs/heads/main' });
    const detail = (await offerDetails(db.current.pool, [Number(rows[0].id)])).get(Number(rows[0].id));
    expect(detail?.webhookPayload).toBe(body);
    const shown = await triggerShow(db.current.pool, { id: hook.id });
    expect(shown.ticks[0]).toMatchObject({ outcome: 'fired', runId });
    expect(shown.ticks[0].deliveryId).toEqual(expect.any(Number));
    // The tick names the delivery by the sender's id, as the 202 answered it.
    expect(shown.ticks[0].deliveryKey).toBe('abc-1');
    const cli = await runCli(['triggers', 'show', String(hook.id), '--database-url', db.current.url]);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toMatch(new RegExp(`fired.*\\b${runId}\\b.*delivery abc-1`));
    expect(cli.stdout).not.toMatch(/delivery \d+\b/);
    // The run names the template version and the trigger it came from.
    const run = await runCli(['runs', 'show', String(runId), '--database-url', db.current.url]);
    expect(run.stdout.split('\n')[0]).toMatch(new RegExp(`^run ${runId} deploy \\(default, from template deploy v1 by trigger ${hook.id}\\): `));
    const runJson = JSON.parse((await runCli(['runs', 'show', String(runId), '--json', '--database-url', db.current.url])).stdout);
    expect(runJson.template).toEqual({ name: 'deploy', version: 1, triggerId: hook.id });
  });

  it('refuses a mapped value the store cannot hold (a NUL or a lone surrogate as a JSON escape) with 400 naming the field, recording nothing', async () => {
    for (const [body, why] of [
      ['{"ref":"a\\u0000b"}', 'contains a NUL character'],
      ['{"ref":"a\\ud800b"}', 'contains an unpaired surrogate (not valid Unicode)'],
    ]) {
      const res = await post(hook.id, body, signed(hook.secret, body));
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: { code: 'invalid_input', message: `payload $.ref (--map env.GIT_REF=$.ref): ${why}` } });
    }
    expect(await deliveryCount(db.current.pool, hook.id)).toBe(0);
    expect((await db.current.pool.query(`SELECT count(*)::int AS n FROM trigger_ticks WHERE trigger_id = $1`, [hook.id])).rows[0].n).toBe(0);
    // The same escape outside a mapped field is only text of the payload: accepted.
    const other = '{"ref":"main","note":"a\\u0000b"}';
    expect((await post(hook.id, other, signed(hook.secret, other))).status).toBe(202);
  });

  it('refuses a wrong signature, a stale timestamp, a replay and a 2 MiB body, recording nothing for them', async () => {
    const body = JSON.stringify({ ref: 'x' });
    const wrong = await post(hook.id, body, signed('ocwhk_not-the-secret', body));
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { message: string } }).error.message).toBe('signature does not match');

    const stale = await post(hook.id, body, signed(hook.secret, body, Math.floor(Date.now() / 1000) - 301));
    expect(stale.status).toBe(401);
    expect(((await stale.json()) as { error: { message: string } }).error.message).toBe('timestamp outside the 5-minute window');

    const tampered = await post(hook.id, `${body} `, signed(hook.secret, body));
    expect(tampered.status).toBe(401);

    const unsigned = await post(hook.id, body, {});
    expect(unsigned.status).toBe(401);

    const big = Buffer.alloc(2 * 1024 * 1024, 0x20);
    const tooBig = await post(hook.id, big, signed(hook.secret, big));
    expect(tooBig.status).toBe(413);

    expect(await deliveryCount(db.current.pool, hook.id)).toBe(0);

    // A replay of one accepted call (same headers, same body) is refused; so is a reused delivery id.
    const headers = signed(hook.secret, body);
    expect((await post(hook.id, body, headers)).status).toBe(202);
    const replay = await post(hook.id, body, headers);
    expect(replay.status).toBe(409);
    const ts = Math.floor(Date.now() / 1000) + 1;
    expect((await post(hook.id, body, signed(hook.secret, body, ts, { 'x-opschain-delivery': 'd-7' }))).status).toBe(202);
    expect((await post(hook.id, `${body}\n`, signed(hook.secret, `${body}\n`, ts, { 'x-opschain-delivery': 'd-7' }))).status).toBe(409);
    expect(await deliveryCount(db.current.pool, hook.id)).toBe(2);

    const unknown = await post(999_999, body, signed(hook.secret, body));
    expect(unknown.status).toBe(404);
  });
});
