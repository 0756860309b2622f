import { loadConfig, type ServerConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type ReplicaPlan, type ServerHandle } from '../../src/server.js';

/** An in-process replica on a test database, HTTP on a free loopback port, nothing written to a home. */
export async function startTestServer(databaseUrl: string, opts: { config?: Partial<ServerConfig>; plan?: ReplicaPlan } = {}): Promise<ServerHandle> {
  const config = { ...loadConfig({ env: {} }), databaseUrl, port: 0, home: '/nonexistent-opschain-home', ...opts.config };
  const log = createLogger(process.env.OPSCHAIN_TEST_LOG ?? 'silent', { pretty: false });
  return startServer({ config, log, plan: opts.plan ?? {}, recordHome: false });
}
