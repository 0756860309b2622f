import { createServer, type Server } from 'node:http';

/**
 * A collector stand-in for the traced throughput drain: accepts OTLP/HTTP exports on loopback and
 * counts their spans without decoding them (each span has one `"spanId":` key), so the bench
 * process, which also runs the simulated fleet, spends next to nothing on it.
 */
export class SpanCounter {
  spans = 0;
  requests = 0;
  url = '';
  private server?: Server;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let n = 0;
      let tail = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        const text = tail + chunk;
        n += text.split('"spanId":').length - 1;
        // A key split across two chunks is counted once, in the later one.
        tail = text.slice(-9);
        if (tail.includes('"spanId":')) tail = '';
      });
      req.on('end', () => {
        this.spans += n;
        this.requests++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const addr = this.server.address();
    this.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
