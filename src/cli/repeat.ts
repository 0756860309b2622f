import { watchPipeReader } from '../pipe-reader.js';

/**
 * A read repeated every `intervalMs` until the process is interrupted: on a terminal each answer
 * replaces the last on a cleared screen; piped, each is one line (NDJSON with `json`). The next
 * read starts when the last one has been written, so reads never overlap. A closed pipe
 * (`| head -3`) ends the loop at once rather than at the next write.
 */
export async function repeatRead<T>(p: { intervalMs: number; read: () => Promise<T>; render: (value: T) => string; json: boolean; out?: NodeJS.WriteStream; signal?: AbortSignal }): Promise<void> {
  const out = p.out ?? process.stdout;
  const tty = Boolean(out.isTTY) && !p.json;
  const gone = new AbortController();
  const unwatch = out === process.stdout ? watchPipeReader(() => gone.abort()) : () => {};
  const signal = p.signal ? AbortSignal.any([p.signal, gone.signal]) : gone.signal;
  try {
    while (!signal.aborted) {
      const value = await p.read();
      if (p.json) out.write(`${JSON.stringify(value)}\n`);
      else out.write(`${tty ? '\x1b[H\x1b[2J' : ''}${p.render(value)}\n`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, p.intervalMs);
        signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
      });
    }
  } finally {
    unwatch();
  }
}
