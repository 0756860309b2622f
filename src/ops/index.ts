/**
 * The operations layer: every verb's behaviour, once, reached through one of two transports.
 *
 *   CLI command ──► Ops ──┬─ storeOps (local home / database URL) ─► DOMAIN[verb](ctx, input)
 *                         └─ httpOps (--server URL --token T) ──► HTTP route ─► DOMAIN[verb](ctx, input)
 *
 * Two halves: `domain/` is the server side (every verb and read model over the store, what an
 * HTTP route runs); `transport/` is the client side (`store.ts` calls the domain in-process,
 * `http.ts` calls a server). `verbs.ts` (DOMAIN) and `verb-specs.ts` (VERBS, each verb's HTTP form,
 * all the HTTP transport loads) are the tables both serve; `Wire<T>` (src/core/wire.ts) the form
 * answers take between them. `follow.ts` and `drain-wait.ts` are client loops over `Ops`.
 *
 * ## How to add a verb
 *
 * 1. Write the domain function in the module of its area (`src/ops/domain/runs.ts`, `fleet.ts`, …):
 *    `async function fooBar(ctx: OpsContext, p: { … }): Promise<Result>`. It validates its input
 *    (throw `Invalid`, `NotFound`, `Conflict`… from `src/errors.ts`, never an exit code or a
 *    status), writes its change and its audit row in ONE transaction (`withTransaction`), and
 *    returns plain data (dates are fine: both transports send them as ISO strings).
 * 2. Add it to `DOMAIN` (`src/ops/verbs.ts`) and describe its HTTP form in `VERBS` (`src/ops/verb-specs.ts`): method, path
 *    (`:field` takes that input field from the path), the least token scope (`read` for a GET,
 *    `runs`, `levers` or `admin`), and a JSON schema per input field. Unknown fields are refused.
 *    The route (`src/api/ops-routes.ts`) and the HTTP transport (`src/ops/transport/http.ts`) are generic:
 *    nothing else to write for HTTP.
 * 3. Write the command: `const result = await (await this.ops()).fooBar({ … })`, render it when
 *    `!this.jsonEnabled()`, return it (the `--json` output).
 * 4. Add a row to the table of `test/ops/transports.test.ts`: the verb runs through both
 *    transports and its `--json` output must be the same.
 *
 * Errors map to exit codes in `src/cli/errors.ts` and to HTTP statuses in `src/api/errors.ts`,
 * each in one place; the error body is `{"error": {"code", "message"}}` everywhere.
 */
import type { OpsContext } from './domain/context.js';
import type { Wire } from '../core/wire.js';
import { DOMAIN, type Verb } from './verbs.js';

export type { OpsContext } from './domain/context.js';
export type { Wire } from '../core/wire.js';
export { DOMAIN, VERBS, type Verb, type VerbSpec } from './verbs.js';

type Input<V extends Verb> = Parameters<(typeof DOMAIN)[V]> extends [OpsContext, infer P] ? P : Record<string, never>;
type Output<V extends Verb> = Wire<Awaited<ReturnType<(typeof DOMAIN)[V]>>>;

/** What a command calls: every verb, the same through either transport. */
export type Ops = { [V in Verb]: (input: Input<V>) => Promise<Output<V>> };
export type OpsInput<V extends Verb> = Input<V>;
export type OpsOutput<V extends Verb> = Output<V>;
