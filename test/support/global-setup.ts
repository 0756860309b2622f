import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedStore, type EmbeddedStore } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/migrate.js';
import { createPool } from '../../src/store/pool.js';
import { withDatabase } from './urls.js';

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string;
    templateDb: string;
    /** The embedded PostgreSQL's log (each line with database and SQLSTATE), or '' for an external server. */
    pgLog: string;
  }
}

/** One PostgreSQL per test run; each test file clones a migrated template database. */
export default async function setup(project: TestProject) {
  let embedded: EmbeddedStore | undefined;
  let dir: string | undefined;
  let adminUrl = process.env.OPSCHAIN_TEST_DATABASE_URL;
  let pgLog = '';
  if (!adminUrl) {
    dir = mkdtempSync(join(tmpdir(), 'opschain-test-'));
    pgLog = join(dir, 'pgdata', 'postgres.log');
    // Every error logged with its database and SQLSTATE, so the fuzz tier can prove no request
    // made the store raise a data (22) or syntax/access (42) error.
    embedded = await startEmbeddedStore({ home: dir, record: false, logFile: pgLog, settings: { log_line_prefix: '%m [%p] db=%d sqlstate=%e ', lc_messages: 'C' } });
    adminUrl = embedded.url;
  }
  const templateDb = `opschain_tpl_${randomBytes(4).toString('hex')}`;
  const admin = createPool(adminUrl, { max: 1 });
  await admin.query(`CREATE DATABASE ${templateDb}`);
  const tplUrl = withDatabase(adminUrl, templateDb);
  const tpl = createPool(tplUrl, { max: 1 });
  await migrate(tpl);
  await tpl.end();
  project.provide('adminUrl', adminUrl);
  project.provide('templateDb', templateDb);
  project.provide('pgLog', pgLog);
  return async () => {
    try {
      const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE $1 OR datname = $2`, [`${templateDb}_%`, templateDb]);
      for (const r of rows) await admin.query(`DROP DATABASE IF EXISTS ${r.datname} WITH (FORCE)`);
    } finally {
      await admin.end();
      await embedded?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  };
}
