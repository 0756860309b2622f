import { Command, Errors, Flags, type Interfaces } from '@oclif/core';
import { redactUrl } from '../config-errors.js';
import { errorBody } from '../errors.js';
import { opschainHome, readLocalSecret, readServerRecord, readStoreRecord } from '../home.js';
import type { Ops } from '../ops/index.js';
import type { Pool } from '../store/pool.js';
import { Invalid, Unavailable } from '../errors.js';
import { asDomainError, EXIT, EXIT_CODES } from './errors.js';
import { terminalSafe } from './render.js';
import { cliActor } from './runs.js';

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
  private storeSource?: { url: string; from: string };

  public override async init(): Promise<void> {
    await super.init();
    const { flags } = await this.parse({ flags: this.ctor.flags, baseFlags: (this.ctor as typeof BaseCommand).baseFlags, args: this.ctor.args, strict: this.ctor.strict, enableJsonFlag: this.ctor.enableJsonFlag });
    this.flags = flags as BaseFlags<T>;
  }

  protected get home(): string {
    return this.flags.home ? opschainHome({ OPSCHAIN_HOME: this.flags.home }) : opschainHome();
  }

  protected databaseUrl(): string {
    if (this.flags['database-url']) return this.remember(this.flags['database-url'], '--database-url / OPSCHAIN_DATABASE_URL');
    if (process.env.DATABASE_URL) return this.remember(process.env.DATABASE_URL, 'DATABASE_URL');
    const recorded = readStoreRecord(this.home)?.databaseUrl;
    if (recorded) return this.remember(recorded, `the local server's record in OPSCHAIN_HOME ${this.home}`);
    throw new Unavailable(`no store found: start one with 'opschain server start' (it records its store in ${this.home}), or pass --database-url, or --server to go through a server`, 'no_store');
  }

  private remember(url: string, from: string): string {
    this.storeSource = { url, from };
    return url;
  }

  /** The pool for this invocation, closed when the command finishes. */
  protected async store(): Promise<Pool> {
    if (!this.pool) {
      // Loaded here, not at the top: a verb that goes over HTTP (or only prints) never loads pg.
      const { createPool } = await import('../store/pool.js');
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

  /**
   * Human output, made safe for a terminal at this one edge: names, reasons and causes come from
   * the store and from other people's tokens, and an escape sequence in one must be shown, not
   * obeyed (docs/security.md, "Terminal safety"). `--json` output goes through `logJson` and keeps
   * the stored values exactly.
   */
  public override log(message = '', ...args: unknown[]): void {
    super.log(terminalSafe(message), ...args.map((a) => (typeof a === 'string' ? terminalSafe(a) : a)));
  }

  public override logToStderr(message = '', ...args: unknown[]): void {
    super.logToStderr(terminalSafe(message), ...args.map((a) => (typeof a === 'string' ? terminalSafe(a) : a)));
  }

  /**
   * Output whose bytes are the user's own and are asked for as they are (step output into a pipe
   * or a file, `runs logs > build.log`): not escaped. Never for text shown on a terminal.
   */
  protected logVerbatim(message: string): void {
    if (!this.jsonEnabled()) process.stdout.write(`${message}\n`);
  }

  /** `Usage: opschain runs show ID [flags]`, the verb's one-line usage hint. */
  protected usageLine(): string {
    const args = Object.entries(this.ctor.args ?? {}).map(([name, a]) => ((a as { required?: boolean }).required ? name.toUpperCase() : `[${name.toUpperCase()}]`));
    return `${this.config.bin} ${(this.id ?? '').replace(/:/g, ' ')} ${args.join(' ')}${args.length ? ' ' : ''}[flags]`;
  }

  /**
   * Every error ends the same way with and without --json: the exit code of its kind (src/cli/errors.ts)
   * and one message, as `Error: …` on stderr or the error body on stdout.
   */
  protected override async catch(err: Error & { oclif?: { exit?: number } }): Promise<unknown> {
    if (err instanceof Errors.ExitError) throw err;
    // oclif's own parse errors are usage errors, checked first: the store-outage test matches
    // messages, and would take an unknown "--timeout" flag for an outage.
    const usage = err.oclif?.exit !== undefined || err instanceof Errors.CLIError;
    const domain = usage ? undefined : asDomainError(err, this.storeSource);
    let body: { error: { code: string; message: string; [k: string]: unknown } };
    let exit: number;
    let extra: string[] = [];
    if (domain) {
      body = errorBody(domain);
      exit = EXIT_CODES[domain.kind];
    } else if (usage) {
      // oclif's own parse errors (unknown flag, missing argument): one line and the usage hint.
      const first = err.message.split('\n')[0].replace(/:$/, '');
      body = { error: { code: 'usage', message: first } };
      exit = EXIT.usage;
      extra = [`Usage: ${this.usageLine()}`, `See '${this.config.bin} ${(this.id ?? '').replace(/:/g, ' ')} --help'.`];
    } else {
      body = { error: { code: 'error', message: err.message } };
      exit = EXIT.failed;
    }
    // A URL in an error (a rejected --database-url) never shows its password.
    body.error.message = redactUrl(body.error.message);
    if (this.jsonEnabled()) this.logJson(body);
    else {
      // A refusal with a list (a run file's problems) names every problem on its own line. A
      // message can quote what was refused (a name, a value): logToStderr shows its controls as text.
      const problems = Array.isArray(body.error.problems) ? (body.error.problems as Array<{ path: string; message: string }>) : [];
      this.logToStderr(`Error: ${body.error.message}${problems.length ? ':' : ''}`);
      for (const p of problems) this.logToStderr(`${p.path}: ${p.message}`);
      for (const line of extra) this.logToStderr(line);
    }
    this.exit(exit);
  }

  protected override toErrorJson(err: unknown): unknown {
    const e = err as { code?: string; message?: string };
    return { error: { code: typeof e.code === 'string' ? e.code : 'error', message: e.message ?? String(err) } };
  }
}

export type OpsFlags<T extends typeof Command> = Interfaces.InferredFlags<(typeof OpsCommand)['baseFlags'] & T['flags']>;

/**
 * A verb of the operations layer: reaches the store directly (as BaseCommand does), or with
 * `--server URL` (OPSCHAIN_SERVER) a server's HTTP API with `--token` (OPSCHAIN_TOKEN). Both go
 * through `this.ops()`, so the verb behaves the same either way.
 */
export abstract class OpsCommand<T extends typeof Command> extends BaseCommand<T> {
  static override baseFlags = {
    ...BaseCommand.baseFlags,
    server: Flags.string({ description: 'a server\'s URL: go through its HTTP API instead of the store', env: 'OPSCHAIN_SERVER', helpGroup: 'GLOBAL' }),
    token: Flags.string({ description: 'API token for --server (default: the local server\'s admin token)', env: 'OPSCHAIN_TOKEN', helpGroup: 'GLOBAL' }),
  };

  declare protected flags: OpsFlags<T>;
  private transport?: Ops;

  /** The operations, through the server when --server is given, else straight to the store. */
  protected async ops(): Promise<Ops> {
    if (this.transport) return this.transport;
    const server = this.flags.server?.replace(/\/+$/, '');
    if (server) {
      if (!/^https?:\/\/[^\s/]+/.test(server)) throw new Invalid(`--server ${server}: expected a URL like http://opschain.internal:7420`, 'usage');
      // The local admin token goes only to the local server; reading it writes nothing in the home.
      const local = readServerRecord(this.home)?.url === server ? this.localSecret('admin') : undefined;
      const { httpOps } = await import('../ops/transport/http.js');
      this.transport = httpOps({ server, token: this.flags.token || local });
    } else {
      const [{ storeOps }, { configFromEnv }] = await Promise.all([import('../ops/transport/store.js'), import('../config.js')]);
      this.transport = storeOps({ pool: await this.store(), actor: `cli:${cliActor()}`, source: 'cli', acceptExceeding: configFromEnv('acceptExceeding') });
    }
    return this.transport;
  }
}
