import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';

const ESC = '\u001b[';

describe('the CLI behaves like the best ones', () => {
  const db = useTestDatabase();

  it('a usage error is one line and the verb\'s usage, the same exit code with and without --json', async () => {
    const plain = await runCli(['runs', 'show', '--database-url', db.current.url]);
    expect(plain.code).toBe(2);
    expect(plain.stderr.trim().split('\n')).toEqual(['Error: Missing 1 required arg', 'Usage: opschain runs show ID [flags]', "See 'opschain runs show --help'."]);
    const json = await runCli(['runs', 'show', '--json', '--database-url', db.current.url]);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({ error: { code: 'usage', message: 'Missing 1 required arg' } });
    const flag = await runCli(['fleet', 'queue', '--nonsense', '--database-url', db.current.url]);
    expect(flag.code).toBe(2);
    expect(flag.stderr.trim().split('\n')[0]).toBe('Error: Nonexistent flag: --nonsense');
  });

  it('no colour in a pipe, with NO_COLOR or without: tables are plain text', async () => {
    for (const env of [{ NO_COLOR: '1' }, { NO_COLOR: '' }, { FORCE_COLOR: '0' }]) {
      const r = await runCli(['db', 'status', '--database-url', db.current.url], env);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/applied/);
      expect(r.stdout.includes(ESC)).toBe(false);
    }
  });

  it('says which of store or server cannot be reached and how to start it, exit 5 both ways', async () => {
    const store = await runCli(['runs', 'list', '--database-url', 'postgres://ops:hunter2@127.0.0.1:1/opschain']);
    expect(store.code).toBe(5);
    expect(store.stderr.trim()).toMatch(/^Error: store unavailable at postgres:\/\/ops:\*\*\*@127\.0\.0\.1:1\/opschain \(from --database-url \/ OPSCHAIN_DATABASE_URL\): .*ECONNREFUSED/);
    expect(store.stderr).not.toMatch(/hunter2/);
    const server = await runCli(['runs', 'list', '--server', 'http://127.0.0.1:9', '--token', 'ocadm_x', '--json']);
    expect(server.code).toBe(5);
    expect(JSON.parse(server.stdout).error).toEqual({ code: 'server_unavailable', message: expect.stringMatching(/^server unavailable: http:\/\/127\.0\.0\.1:9 cannot be reached .*start it with 'opschain server start'/) });
  });
});
