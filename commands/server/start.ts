import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { serverPlan } from '../../src/features.js';
import { startServer } from '../../src/server.js';

export default class ServerStart extends BaseCommand<typeof ServerStart> {
  static override description = 'Start a replica: migrations, membership, dispatch, HTTP API. With no database URL it runs an embedded PostgreSQL under $OPSCHAIN_HOME.';
  static override examples = ['<%= config.bin %> server start', '<%= config.bin %> server start --database-url postgres://ops@db/opschain --port 7420 --site dc1'];
  static override flags = {
    'accept-exceeding': Flags.boolean({ allowNo: true, description: 'let the most capable idle runner take a step larger than every max_load' }),
    config: Flags.string({ description: 'YAML config file (flags > OPSCHAIN_* env > file > defaults)' }),
    host: Flags.string({ description: 'HTTP listen address [default: 127.0.0.1]' }),
    'lease-ttl': Flags.string({ description: 'lost-runner fencing window [default: 3m]' }),
    'listen-database-url': Flags.string({ description: 'a direct PostgreSQL session for LISTEN when --database-url is PgBouncer in transaction mode (env OPSCHAIN_LISTEN_DATABASE_URL)' }),
    'log-level': Flags.string({ description: 'trace|debug|info|warn|error|fatal|silent [default: info]' }),
    'poll-window': Flags.string({ description: 'runner long-poll window [default: 50s]' }),
    port: Flags.string({ description: 'HTTP port, 0 for any free port [default: 7420]' }),
    'replica-retention': Flags.string({ description: 'how long dead replica rows stay visible [default: 24h]' }),
    site: Flags.string({ description: 'site identity of this replica, e.g. dc1' }),
  };
  static override summary = 'Start the opschain server';

  async run(): Promise<void> {
    const f = this.flags;
    const config = loadConfig({
      configFile: f.config,
      flags: {
        database_url: f['database-url'],
        listen_database_url: f['listen-database-url'],
        home: f.home,
        host: f.host,
        port: f.port,
        site: f.site,
        log_level: f['log-level'],
        lease_ttl: f['lease-ttl'],
        poll_window: f['poll-window'],
        replica_retention: f['replica-retention'],
        'dispatch.accept_exceeding': f['accept-exceeding'],
      },
    });
    const log = createLogger(config.logLevel);
    const server = await startServer({ config, log, plan: serverPlan() });
    await new Promise<void>((resolve) => {
      let signalled = false;
      const onSignal = (sig: string) => {
        if (signalled) {
          log.warn(`${sig} again: already stopping (at most 10s)`);
          return;
        }
        signalled = true;
        // A stuck shutdown must still end the process within the promised 10 s.
        setTimeout(() => {
          log.error('shutdown took longer than 10s; exiting');
          process.exit(1);
        }, 10_000).unref();
        server.stop().then(resolve, (err) => {
          log.error({ err: (err as Error).message }, 'shutdown failed');
          resolve();
        });
      };
      process.on('SIGINT', () => onSignal('SIGINT'));
      process.on('SIGTERM', () => onSignal('SIGTERM'));
    });
    log.flush?.();
    process.exit(0);
  }
}
