import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** The part of fetch the HTTP transport uses; the global fetch fits it too. */
export type FetchLike = (url: string, init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal }) => Promise<FetchAnswer>;

export interface FetchAnswer {
  ok: boolean;
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/**
 * One request over node:http(s), answered like fetch. The global fetch loads undici on first
 * use, about 90 ms of a one-shot CLI verb's 250 (docs/performance.md, startup); a verb sends one
 * request, so it needs none of undici's pooling. Redirects are not followed: the API never
 * answers with one, and one from a proxy is reported as not an opschain server.
 */
export const nodeFetch: FetchLike = (url, init) =>
  new Promise((resolve, reject) => {
    const u = new URL(url);
    const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers: Record<string, string | number> = { ...init.headers };
    if (init.body !== undefined) headers['content-length'] = Buffer.byteLength(init.body);
    const req = send(u, { method: init.method, headers, signal: init.signal }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({
          ok: status >= 200 && status < 300,
          status,
          headers: { get: (name) => [res.headers[name.toLowerCase()]].flat()[0] ?? null },
          text: async () => text,
        });
      });
    });
    req.on('error', (err) => reject(init.signal?.aborted ? init.signal.reason : err));
    req.end(init.body);
  });
