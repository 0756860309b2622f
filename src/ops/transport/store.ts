import type { OpsContext } from '../domain/context.js';
import { wire } from '../../core/wire.js';
import type { Ops } from '../index.js';
import { DOMAIN, type Verb } from '../verbs.js';

/**
 * The store transport: each verb's domain function on this process's pool. Answers go through
 * the wire form, so a command sees exactly what the HTTP transport would hand it.
 */
export function storeOps(ctx: OpsContext): Ops {
  const ops: Record<string, (input: unknown) => Promise<unknown>> = {};
  for (const verb of Object.keys(DOMAIN) as Verb[]) {
    const fn = DOMAIN[verb] as (ctx: OpsContext, input: unknown) => Promise<unknown>;
    ops[verb] = async (input) => wire(await fn(ctx, input ?? {}));
  }
  return ops as unknown as Ops;
}
