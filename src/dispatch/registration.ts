import { randomBytes } from 'node:crypto';
import { hashSecret, newSecret, secretKind } from '../core/tokens.js';
import { Conflict, Forbidden } from '../errors.js';
import { auditRecord } from '../store/audit.js';
import type { Pool } from '../store/pool.js';
import { RegistrationGroupRefusedError, runnerRegisterExclusive, RunnerNameTakenError, type RunnerRow } from '../store/runners.js';
import { tokenVerify, type TokenRow } from '../store/tokens.js';

export const PROTOCOL_VERSION = 1;

/** What a runner says of itself when it registers (docs/runner-protocol.md), defaults filled in here. */
export interface RegistrationRequest {
  name: string;
  group?: string | null;
  labels?: string[];
  executors?: string[];
  maxLoad?: number;
  maxParallelSteps?: number;
  site?: string | null;
  protocolVersion?: number;
}

export interface Registered {
  runnerId: string;
  /** The runner's credential: shown this once, stored only as its hash. */
  credential: string;
  /** The runner as registered (what a credential lookup would read of it now). */
  runner: RunnerRow;
}

/**
 * Runner registration on one replica: a live registration token admits a runner into the groups
 * the token is bound to; the runner gets an id and a credential, and the registration is audited.
 */
export class RegistrationService {
  constructor(private readonly deps: { pool: Pool; replicaId: string }) {}

  /** The live registration token `presented` names, or undefined (not a registration token, revoked, unknown). */
  async token(presented: unknown): Promise<TokenRow | undefined> {
    if (typeof presented !== 'string' || secretKind(presented) !== 'registration') return undefined;
    return tokenVerify(this.deps.pool, 'registration', presented);
  }

  /**
   * Registers (or re-registers, retiring the runner of that name) under `token`. A name held by a
   * live runner of another token is a Conflict; a group the token is not bound to is Forbidden.
   */
  async register(token: TokenRow, req: RegistrationRequest, source: string): Promise<Registered> {
    const { pool, replicaId } = this.deps;
    const credential = newSecret('runner');
    let registered: Awaited<ReturnType<typeof runnerRegisterExclusive>>;
    try {
      registered = await runnerRegisterExclusive(pool, {
        id: `rnr_${randomBytes(8).toString('hex')}`,
        name: req.name,
        group: req.group ?? null,
        labels: req.labels ?? [],
        executors: req.executors ?? ['shell'],
        maxLoad: req.maxLoad ?? 1,
        maxParallelSteps: req.maxParallelSteps ?? 1,
        site: req.site ?? null,
        protocolVersion: req.protocolVersion ?? PROTOCOL_VERSION,
        credentialHash: hashSecret(credential),
        replicaId,
        registrationTokenId: token.id,
      }, { tokenId: token.id, groups: token.groups });
    } catch (err) {
      if (err instanceof RunnerNameTakenError) throw new Conflict(err.message, 'runner_name_taken');
      if (err instanceof RegistrationGroupRefusedError) throw new Forbidden(err.message, 'registration_group_refused');
      throw err;
    }
    const { runner, retired } = registered;
    await auditRecord(pool, { actor: `token:${token.id}`, action: 'runner.register', target: runner.id, source, detail: { name: runner.name, group: runner.group, ...(retired.length ? { retired } : {}) } });
    return { runnerId: runner.id, credential, runner };
  }
}
