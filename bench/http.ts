import { Agent, request } from 'node:http';

export interface HttpAnswer { status: number; body: any }

/**
 * A keep-alive JSON client over node:http: one agent per fleet, no cap on sockets, so every
 * simulated runner's parked acquire has its own connection and acks/completions never queue
 * behind it.
 */
export class JsonClient {
  readonly agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096, keepAliveMsecs: 10_000 });
  private closed = false;

  post(baseUrl: string, path: string, body: unknown, credential?: string, timeoutMs = 120_000): Promise<HttpAnswer> {
    const payload = Buffer.from(JSON.stringify(body));
    const u = new URL(path, baseUrl);
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('client closed'));
      const req = request(
        {
          agent: this.agent,
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-length': payload.length,
            ...(credential ? { authorization: `Bearer ${credential}` } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: any = undefined;
            if (text) {
              try {
                parsed = JSON.parse(text);
              } catch {
                parsed = text;
              }
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on('error', reject);
        },
      );
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`POST ${path} timed out after ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** Ends every connection, which also aborts parked long polls. */
  close(): void {
    this.closed = true;
    this.agent.destroy();
  }
}
