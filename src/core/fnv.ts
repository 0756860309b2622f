import { SHARD_COUNT } from './entry.js';

/** 32-bit FNV-1a of a string's UTF-8 bytes. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The shard of a run: every step of a run lands on one shard, so one dispatcher owns it. */
export function shardOf(runId: number | string): number {
  return fnv1a(String(runId)) % SHARD_COUNT;
}
