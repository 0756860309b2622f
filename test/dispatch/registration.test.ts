import { describe, expect, it } from 'vitest';
import { hashSecret } from '../../src/core/tokens.js';
import { PROTOCOL_VERSION, RegistrationService } from '../../src/dispatch/registration.js';
import { Conflict, Forbidden } from '../../src/errors.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';

describe('runner registration (the service behind POST /api/runner/register)', () => {
  const db = useTestDatabase();

  it('admits only a live registration token, registers with the defaults, stores the credential\'s hash only, and audits', async () => {
    const pool = db.current.pool;
    const registration = new RegistrationService({ pool, replicaId: 'replica-reg' });
    const { secret } = await tokenCreate(pool, { kind: 'registration', name: 'fleet' });
    const admin = await tokenCreate(pool, { kind: 'admin', name: 'ops' });
    expect(await registration.token(undefined)).toBeUndefined();
    expect(await registration.token(42)).toBeUndefined();
    expect(await registration.token(admin.secret)).toBeUndefined();
    expect(await registration.token(`${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`)).toBeUndefined();
    const token = (await registration.token(secret))!;
    expect(token.name).toBe('fleet');

    const { runnerId, credential } = await registration.register(token, { name: 'build-1' }, '10.0.0.7');
    const { rows } = await pool.query(`SELECT * FROM runners WHERE id = $1`, [runnerId]);
    expect(rows[0]).toMatchObject({ name: 'build-1', group_name: null, labels: [], executors: ['shell'], max_parallel_steps: 1, protocol_version: PROTOCOL_VERSION, credential_hash: hashSecret(credential), registration_token_id: token.id });
    expect(JSON.stringify(rows[0])).not.toContain(credential);
    const audit = await pool.query(`SELECT actor, target, source, detail FROM audit_log WHERE action = 'runner.register'`);
    expect(audit.rows).toEqual([{ actor: `token:${token.id}`, target: runnerId, source: '10.0.0.7', detail: { name: 'build-1', group: null } }]);
  });

  it('a name a live runner holds is a Conflict, a group the token is not bound to is Forbidden; neither writes', async () => {
    const pool = db.current.pool;
    const registration = new RegistrationService({ pool, replicaId: 'replica-reg' });
    const open = (await registration.token((await tokenCreate(pool, { kind: 'registration', name: 'open' })).secret))!;
    const prod = (await registration.token((await tokenCreate(pool, { kind: 'registration', name: 'prod', groups: ['prod'] })).secret))!;
    await registration.register(open, { name: 'deploy-1' }, 'test');
    const before = Number((await pool.query(`SELECT count(*) FROM runners`)).rows[0].count);

    const taken = await registration.register(open, { name: 'deploy-1' }, 'test').catch((err) => err);
    expect(taken).toBeInstanceOf(Conflict);
    expect(taken).toMatchObject({ code: 'runner_name_taken' });
    const refused = await registration.register(prod, { name: 'deploy-2', group: 'staging' }, 'test').catch((err) => err);
    expect(refused).toBeInstanceOf(Forbidden);
    expect(refused).toMatchObject({ code: 'registration_group_refused' });
    expect(Number((await pool.query(`SELECT count(*) FROM runners`)).rows[0].count)).toBe(before);
  });
});
