import { systemClock, type Clock } from '../clock.js';
import { prefixWithinBytes } from '../core/bounds.js';
import type { LogChunk } from './protocol.js';

export interface LogBatcherOptions {
  /**
   * One logs call; 'lost' when the lease is fenced, 'full' when the server keeps no more of this
   * step's output (its log cap). The signal aborts it when close() gives up.
   */
  send: (chunks: LogChunk[], signal: AbortSignal) => Promise<'ok' | 'lost' | 'full'>;
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
  /**
   * How long close() waits for the rest of the output to be delivered before it drops it, so a
   * log call that cannot succeed never holds the step's completion. Default 30 s.
   */
  closeTimeoutMs?: number;
}

/**
 * Collects a step's output and sends it in order, in batches: every ~250 ms or 32 KB, whichever
 * comes first, one call in flight at a time. Adjacent text of the same stream is merged.
 *
 * A batch the server refuses for good (a 4xx other than the verdicts, a repeated 500) is dropped
 * and the next batch opens with a marker saying how much was lost and why; close() waits at most
 * closeTimeoutMs, then drops what is left (also marked in the runner's log), so the completion
 * that follows is never held behind output.
 */
export class LogBatcher {
  private readonly opts: Required<Omit<LogBatcherOptions, 'onError'>> & Pick<LogBatcherOptions, 'onError'>;
  private buffer: LogChunk[] = [];
  private bytes = 0;
  private dropped = 0;
  private lost = false;
  private full = false;
  private closing = false;
  private timer?: AbortController;
  private pumping?: Promise<void>;
  private idle: Array<() => void> = [];
  private refused = 0;
  private refusedWhy = '';
  private marker?: LogChunk;
  private readonly giveUp = new AbortController();
  /** Bytes of output dropped because the server refused them or close() gave up; for the step's summary. */
  droppedBytes = 0;
  /** Calls made, for tests and the step's summary line. */
  calls = 0;

  constructor(opts: LogBatcherOptions) {
    this.opts = { clock: systemClock, flushMs: 250, maxBatchBytes: 32 * 1024, maxBufferedBytes: 8 * 1024 * 1024, closeTimeoutMs: 30_000, ...opts };
  }

  get isLost(): boolean {
    return this.lost;
  }

  /** The server's log of this step is full: output is no longer sent. */
  get isFull(): boolean {
    return this.full;
  }

  push(stream: LogChunk['stream'], text: string): void {
    if (this.lost || this.full || this.closing || text.length === 0) return;
    const size = Buffer.byteLength(text);
    if (this.bytes + size > this.opts.maxBufferedBytes) {
      this.dropped += size;
      return;
    }
    if (this.dropped > 0) {
      this.append('stderr', `[opschain runner: ${this.dropped} bytes of output dropped while the server was unreachable]\n`);
      this.dropped = 0;
    }
    this.noteRefused();
    this.append(stream, text);
    if (this.bytes >= this.opts.maxBatchBytes) this.flushNow();
    else this.arm();
  }

  /**
   * Sends everything buffered and resolves when it is delivered, the lease is lost, or
   * closeTimeoutMs has passed (then the rest is dropped and the call in flight aborted).
   */
  async close(): Promise<void> {
    this.closing = true;
    if (this.dropped > 0 && !this.lost) {
      this.append('stderr', `[opschain runner: ${this.dropped} bytes of output dropped while the server was unreachable]\n`);
      this.dropped = 0;
    }
    this.noteRefused();
    this.flushNow();
    const timer = new AbortController();
    void this.opts.clock.sleep(this.opts.closeTimeoutMs, timer.signal).then(() => {
      if (timer.signal.aborted) return;
      this.droppedBytes += this.bytes;
      this.buffer = [];
      this.bytes = 0;
      this.giveUp.abort();
      for (const r of this.idle.splice(0)) r();
    });
    try {
      while (!this.giveUp.signal.aborted && (this.pumping || (this.buffer.length > 0 && !this.lost))) {
        await new Promise<void>((r) => this.idle.push(r));
      }
    } finally {
      timer.abort();
    }
  }

  /** Opens the next batch with a line saying what the server refused, once per refusal. */
  private noteRefused(): void {
    if (this.refused === 0 || this.lost) return;
    const chunk: LogChunk = { stream: 'stderr', text: `[opschain runner: ${this.refused} bytes of output were refused by the server and dropped (${this.refusedWhy})]\n` };
    this.refused = 0;
    this.marker = chunk;
    this.buffer.unshift(chunk);
    this.bytes += Buffer.byteLength(chunk.text);
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
      const answer = await this.opts.send(batch, this.giveUp.signal);
      if (answer === 'lost') {
        this.lost = true;
        this.buffer = [];
        this.bytes = 0;
        this.opts.onLost();
      } else if (answer === 'full') {
        // The server already wrote the truncation line; nothing more of this step is kept.
        this.full = true;
        this.droppedBytes += this.bytes;
        this.buffer = [];
        this.bytes = 0;
      }
    } catch (err) {
      const size = batch.reduce((n, c) => n + Buffer.byteLength(c.text), 0);
      this.droppedBytes += size;
      if (this.giveUp.signal.aborted) return;
      this.opts.onError?.(err);
      // A refused marker is not marked again: that could go on for ever.
      if (batch[0] !== this.marker) {
        this.refused += size;
        this.refusedWhy = (err as Error).message.replace(/\s+/g, ' ').slice(0, 200);
        if (this.closing) this.noteRefused();
      }
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

