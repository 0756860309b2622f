import { Command, Flags, Errors, type Interfaces } from '@oclif/core';
import { ConfigError, redactUrl } from '../config.js';
import { opschainHome, readLocalSecret, readServerRecord, readStoreRecord } from '../home.js';
import { createPool, isStoreUnavailable, storeCause, type Pool } from '../store/pool.js';
import { UserError } from './errors.js';

export type BaseFlags<T extends typeof Command> = Interfaces.InferredFlags<(typeof BaseCommand)['baseFlags'] & T['flags']>;

/**
 * Shared flags, store resolution and error mapping. Verbs reach the store directly: the flag,
 * then DATABASE_URL, then the URL the local server recorded in $OPSCHAIN_HOME.
 */
export abstract class BaseCommand<T extends typeof Command> extends Command {
  static override baseFlags = {
    'database-url': Flags.string({ description: 'PostgreSQL URL (default: DATABASE_URL, then the local server\'s store)', env: 'OPSCHAIN_DATABASE_URL', helpGroup: 'GLOBAL' }),
    home: Flags.string({ description: 'state directory (default ~/.opschain)', env: 'OPSCHAIN_HOME', helpGroup: 'GLOBAL' }),
  };

  protected flags!: BaseFlags<T>;
  private pool?: Pool;

  public override async init(): Promise<void> {
    await super.init();
    const { flags } = await this.parse({ flags: this.ctor.flags, baseFlags: (this.ctor as typeof BaseCommand).baseFlags, args: this.ctor.args, strict: this.ctor.strict, enableJsonFlag: this.ctor.enableJsonFlag });
    this.flags = flags as BaseFlags<T>;
  }

  protected get home(): string {
    return this.flags.home ? opschainHome({ OPSCHAIN_HOME: this.flags.home }) : opschainHome();
  }

  protected databaseUrl(): string {
    const url = this.flags['database-url'] || process.env.DATABASE_URL || readStoreRecord(this.home)?.databaseUrl;
    if (!url) {
      throw new UserError(`no store found: start one with 'opschain server start' (it records its store in ${this.home}) or pass --database-url`, 'no_store');
    }
    return url;
  }

  /** The pool for this invocation, closed when the command finishes. */
  protected async store(): Promise<Pool> {
    if (!this.pool) {
      this.pool = createPool(this.databaseUrl(), { max: 4, applicationName: `opschain ${this.id ?? ''}`.trim() });
    }
    return this.pool;
  }

  protected localServerUrl(): string | undefined {
    return process.env.OPSCHAIN_SERVER || readServerRecord(this.home)?.url;
  }

  protected localSecret(name: 'admin' | 'registration'): string | undefined {
    return readLocalSecret(this.home, name);
  }

  protected override async finally(err: Error | undefined): Promise<unknown> {
    await this.pool?.end().catch(() => {});
    return super.finally(err);
  }

  protected override async catch(err: Error & { oclif?: { exit?: number } }): Promise<unknown> {
    if (err instanceof Errors.ExitError) throw err;
    let code = 'error';
    let exit = 1;
    let message = err.message;
    if (err instanceof UserError) {
      code = err.code;
      exit = err.exitCode;
    } else if (err instanceof ConfigError) {
      code = 'invalid_config';
      exit = 2;
    } else if (err.oclif?.exit !== undefined) {
      // oclif's own parse errors (unknown flag, missing argument) already say what was wrong;
      // checked before the store test, whose message match would take "--timeout" for an outage.
      return super.catch(err);
    } else if (isStoreUnavailable(err)) {
      code = 'store_unavailable';
      exit = 3;
      message = `store unavailable: ${storeCause(err)}`;
    }
    // A URL in an error (a rejected --database-url) never shows its password.
    message = redactUrl(message);
    if (this.jsonEnabled()) this.logJson({ error: { code, message } });
    else this.logToStderr(`Error: ${message}`);
    this.exit(exit);
  }

  protected override toErrorJson(err: unknown): unknown {
    const e = err as { code?: string; message?: string };
    return { error: { code: typeof e.code === 'string' ? e.code : 'error', message: e.message ?? String(err) } };
  }
}
