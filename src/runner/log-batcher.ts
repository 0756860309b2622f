import { systemClock, type Clock } from '../clock.js';
import type { LogChunk } from './protocol.js';

export interface LogBatcherOptions {
  /** One logs call; 'lost' when the lease is fenced. */
  send: (chunks: LogChunk[]) => Promise<'ok' | 'lost'>;
  /** The lease is fenced: the step must be killed. Called once. */
  onLost: () => void;
  /** A batch that could not be delivered for another reason (it is dropped). */
  onError?: (err: unknown) => void;
  clock?: Clock;
  /** Output waits at most this long before it is sent. */
  flushMs?: number;
  /** A batch is sent as soon as this much is buffered, and no call carries more. */
  maxBatchBytes?: number;
  /** While the server is unreachable, output beyond this is dropped (and the drop is noted in the log). */
  maxBufferedBytes?: number;
}

/**
 * Collects a step's output and sends it in order, in batches: every ~250 ms or 32 KB, whichever
 * comes first, one call in flight at a time. Adjacent text of the same stream is merged.
 */
export class LogBatcher {
  private readonly opts: Required<Omit<LogBatcherOptions, 'onError'>> & Pick<LogBatcherOptions, 'onError'>;
  private buffer: LogChunk[] = [];
  private bytes = 0;
  private dropped = 0;
  private lost = false;
  private closing = false;
  private timer?: AbortController;
  private pumping?: Promise<void>;
  private idle: Array<() => void> = [];
  /** Calls made, for tests and the step's summary line. */
  calls = 0;

  constructor(opts: LogBatcherOptions) {
    this.opts = { clock: systemClock, flushMs: 250, maxBatchBytes: 32 * 1024, maxBufferedBytes: 8 * 1024 * 1024, ...opts };
  }

  get isLost(): boolean {
    return this.lost;
  }

  push(stream: LogChunk['stream'], text: string): void {
    if (this.lost || this.closing || text.length === 0) return;
    const size = Buffer.byteLength(text);
    if (this.bytes + size > this.opts.maxBufferedBytes) {
      this.dropped += size;
      return;
    }
    if (this.dropped > 0) {
      this.append('stderr', `[opschain runner: ${this.dropped} bytes of output dropped while the server was unreachable]\n`);
      this.dropped = 0;
    }
    this.append(stream, text);
    if (this.bytes >= this.opts.maxBatchBytes) this.flushNow();
    else this.arm();
  }

  /** Sends everything buffered and resolves when it is delivered (or the lease is lost). */
  async close(): Promise<void> {
    this.closing = true;
    if (this.dropped > 0 && !this.lost) {
      this.append('stderr', `[opschain runner: ${this.dropped} bytes of output dropped while the server was unreachable]\n`);
      this.dropped = 0;
    }
    this.flushNow();
    while (this.pumping || (this.buffer.length > 0 && !this.lost)) {
      await new Promise<void>((r) => this.idle.push(r));
    }
  }

  private append(stream: LogChunk['stream'], text: string): void {
    const last = this.buffer[this.buffer.length - 1];
    if (last && last.stream === stream) last.text += text;
    else this.buffer.push({ stream, text });
    this.bytes += Buffer.byteLength(text);
  }

  private arm(): void {
    if (this.timer || this.pumping) return;
    const timer = new AbortController();
    this.timer = timer;
    void this.opts.clock.sleep(this.opts.flushMs, timer.signal).then(() => {
      if (timer.signal.aborted) return;
      this.timer = undefined;
      this.kick();
    });
  }

  private flushNow(): void {
    this.timer?.abort();
    this.timer = undefined;
    this.kick();
  }

  private kick(): void {
    if (this.pumping) return;
    this.pumping = this.pump().finally(() => {
      this.pumping = undefined;
      if (this.buffer.length > 0 && !this.lost) {
        if (this.closing || this.bytes >= this.opts.maxBatchBytes) this.kick();
        else this.arm();
      }
      if (!this.pumping) for (const r of this.idle.splice(0)) r();
    });
  }

  private async pump(): Promise<void> {
    if (this.buffer.length === 0 || this.lost) return;
    const batch = this.take(this.opts.maxBatchBytes);
    this.calls++;
    try {
      if ((await this.opts.send(batch)) === 'lost') {
        this.lost = true;
        this.buffer = [];
        this.bytes = 0;
        this.opts.onLost();
      }
    } catch (err) {
      this.opts.onError?.(err);
    }
  }

  /** Takes up to max bytes off the front of the buffer, splitting a chunk on a character boundary. */
  private take(max: number): LogChunk[] {
    const out: LogChunk[] = [];
    let room = max;
    while (this.buffer.length > 0 && room > 0) {
      const head = this.buffer[0];
      const size = Buffer.byteLength(head.text);
      if (size <= room) {
        out.push(this.buffer.shift()!);
        room -= size;
        this.bytes -= size;
        continue;
      }
      const cut = prefixWithinBytes(head.text, room);
      if (cut.length === 0) break;
      out.push({ stream: head.stream, text: cut });
      head.text = head.text.slice(cut.length);
      this.bytes -= Buffer.byteLength(cut);
      room = 0;
    }
    if (out.length === 0 && this.buffer.length > 0) {
      // A single character wider than the room: send it alone rather than stall.
      const head = this.buffer.shift()!;
      this.bytes -= Buffer.byteLength(head.text);
      out.push(head);
    }
    return out;
  }
}

/** The longest prefix of text whose UTF-8 encoding fits in max bytes, never splitting a surrogate pair. */
function prefixWithinBytes(text: string, max: number): string {
  let bytes = 0;
  let i = 0;
  while (i < text.length) {
    const code = text.codePointAt(i)!;
    const width = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    if (bytes + width > max) break;
    bytes += width;
    i += code >= 0x10000 ? 2 : 1;
  }
  return text.slice(0, i);
}
