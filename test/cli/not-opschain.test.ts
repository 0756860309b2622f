import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';

const PAGE = `<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome</title>\n</head>\n<body>\n<h1>It works</h1>\n<p>Some other web server.</p>\n</body>\n</html>\n`;

describe('a URL that is not an opschain server', () => {
  let server: Server;
  let url = '';
  beforeAll(async () => {
    // A web server of some other kind: HTML for every path, 404 for the API's paths and 200 for the rest.
    server = createServer((req, res) => {
      res.writeHead(req.url?.startsWith('/api/runs') ? 404 : 200, { 'content-type': 'text/html' });
      res.end(PAGE);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('one line naming the URL, exit 5, with and without --json', async () => {
    const plain = await runCli(['runs', 'list'], { OPSCHAIN_SERVER: url, OPSCHAIN_TOKEN: 'ocadm_x' });
    expect(plain.code).toBe(5);
    expect(plain.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^Error: not an opschain server at ${url.replace(/\./g, '\\.')} \\(HTTP 404, text/html\\)`))]);
    expect(plain.stderr).not.toMatch(/<html>|<h1>/);
    const json = await runCli(['fleet', 'runners', '--json'], { OPSCHAIN_SERVER: url, OPSCHAIN_TOKEN: 'ocadm_x' });
    expect(json.code).toBe(5);
    expect(JSON.parse(json.stdout).error).toEqual({ code: 'not_opschain', message: expect.stringMatching(/^not an opschain server at http:\/\/127\.0\.0\.1:\d+ \(HTTP 200, text\/html\)/) });
  });
});
