/**
 * How each verb travels over HTTP, apart from its domain function (src/ops/verbs.ts): the HTTP
 * transport needs only this, so a CLI verb that goes through a server loads no store code.
 */
import { INT4, LOAD_MIN, SAFE_TEXT_PATTERN } from '../core/bounds.js';
import { POSTURE_VERBS, type PostureVerb } from '../core/postures.js';
import { RUN_STATUSES } from '../core/run-status.js';
import type { Scope } from '../core/tokens.js';

/** The most leases one admin queue answer lists (all are counted). */
export const ADMIN_QUEUE_MAX_LIMIT = 10_000;

/** A JSON schema fragment for one input field. */
export type FieldSchema = Record<string, unknown> & { type?: string | string[] };

/**
 * How a verb travels over HTTP. GET and DELETE carry the input in the path and the query string
 * (integers, numbers and booleans as their text); POST in the path and a JSON body. Unknown fields
 * are refused and nothing is coerced beyond that: the route decodes by these types.
 */
export interface VerbSpec {
  method: 'GET' | 'POST' | 'DELETE';
  /** `/api/runs/:id`: each `:name` is the input field of that name. */
  path: string;
  /** The least token scope the route needs. */
  scope: Scope;
  fields: Record<string, FieldSchema>;
  required?: string[];
  /** A long poll: the answer may take up to the input's `waitMs`. */
  longPoll?: boolean;
  /** The largest body the route reads (the server default is 64 KiB). */
  bodyLimit?: number;
  /** A former path of the same route, still served (deprecated; docs/cli.md). */
  deprecatedPath?: string;
}

// Bounded to the columns they land in, as src/api/schema.ts does for every route (core/bounds.ts).
const id = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER };
const text = (max = 200) => ({ type: 'string', minLength: 1, maxLength: max, pattern: SAFE_TEXT_PATTERN });
const reason = { type: 'string', maxLength: 1000, pattern: SAFE_TEXT_PATTERN };
const posture: Record<string, FieldSchema> = { reason, until: text(64) };
/** A posture verb's route, from its row of POSTURE_VERBS (`fleet/quiesce` → /api/admin/fleet/quiesce). */
const postureSpec = (verb: PostureVerb): VerbSpec => {
  const v: { route: string; deprecatedRoute?: string; scope: Scope } = POSTURE_VERBS[verb];
  return { method: 'POST', path: `/api/admin/${v.route}`, ...(v.deprecatedRoute ? { deprecatedPath: `/api/admin/${v.deprecatedRoute}` } : {}), scope: v.scope, fields: posture };
};
const texts = { type: 'array', items: text(128), maxItems: 64 };
const drain: Record<string, FieldSchema> = { runner: text(), group: text(), reason };

const SPECS = {
  runsSubmit: {
    method: 'POST',
    path: '/api/runs',
    scope: 'runs',
    fields: {
      file: { type: 'string', minLength: 1, maxLength: 4_194_304, pattern: SAFE_TEXT_PATTERN },
      set: { type: 'array', items: text(10_000), maxItems: 256 },
      // The header of the same name is read when the body has none (src/api/ops-routes.ts).
      traceparent: text(256),
    },
    required: ['file'],
    bodyLimit: 8 * 1024 * 1024,
  },
  runsShow: { method: 'GET', path: '/api/runs/:id', scope: 'read', fields: { id, verdicts: { type: 'boolean' } }, required: ['id'] },
  runsList: {
    method: 'GET',
    path: '/api/runs',
    scope: 'read',
    fields: { limit: { type: 'integer', minimum: 1, maximum: 1000 }, before: id, project: text(), status: { type: 'string', enum: [...RUN_STATUSES] } },
  },
  runsLogs: {
    method: 'GET',
    path: '/api/runs/:id/logs',
    scope: 'read',
    fields: { id, step: text(), after: { type: 'string', maxLength: 100_000 }, waitMs: { type: 'integer', minimum: 0, maximum: 60_000 }, limit: { type: 'integer', minimum: 1, maximum: 10_000 } },
    required: ['id'],
    longPoll: true,
  },
  runsRetry: { method: 'POST', path: '/api/runs/:id/retry', scope: 'runs', fields: { id }, required: ['id'] },
  runsCancel: { method: 'POST', path: '/api/runs/:id/cancel', scope: 'runs', fields: { id }, required: ['id'] },
  fleetDrain: { method: 'POST', path: '/api/fleet/drain', scope: 'levers', fields: drain },
  fleetUndrain: { method: 'POST', path: '/api/fleet/undrain', scope: 'levers', fields: drain },
  fleetDrainPreview: { method: 'GET', path: '/api/fleet/drain/preview', scope: 'read', fields: { runner: text(), group: text() } },
  fleetDrainOutstanding: { method: 'GET', path: '/api/fleet/drain/held', scope: 'read', fields: { runner: text(), group: text() } },
  fleetRunnersRemove: { method: 'POST', path: '/api/fleet/runners/:runner/remove', scope: 'admin', fields: { runner: text(), reason }, required: ['runner'] },
  fleetDemand: { method: 'GET', path: '/api/fleet/demand', scope: 'read', fields: { group: text(), acceptExceeding: { type: 'boolean' } } },
  fleetWhatIf: {
    method: 'GET',
    path: '/api/fleet/what-if',
    scope: 'read',
    fields: {
      drain: text(4000),
      drainGroup: text(4000),
      undrain: text(4000),
      undrainGroup: text(4000),
      pool: text(4000),
      weight: text(4000),
      removeRunner: text(4000),
      addRunners: { type: 'integer', minimum: 1, maximum: 10_000 },
      group: text(),
      label: text(4000),
      maxLoad: { type: 'number', minimum: LOAD_MIN, maximum: 1_000_000 },
      limit: { type: 'integer', minimum: 0, maximum: 10_000 },
      acceptExceeding: { type: 'boolean' },
    },
  },
  fleetRunners: { method: 'GET', path: '/api/fleet/runners', scope: 'read', fields: {} },
  adminQueue: { method: 'GET', path: '/api/admin/queue', scope: 'read', fields: { limit: { type: 'integer', minimum: 1, maximum: ADMIN_QUEUE_MAX_LIMIT }, acceptExceeding: { type: 'boolean' } } },
  fleetQueue: { method: 'GET', path: '/api/fleet/queue', scope: 'read', fields: { limit: { type: 'integer', minimum: 1, maximum: 99_999 }, acceptExceeding: { type: 'boolean' } } },
  poolsList: { method: 'GET', path: '/api/pools', scope: 'read', fields: {} },
  poolsSet: { method: 'POST', path: '/api/pools/:name', scope: 'admin', fields: { name: text(), limit: { type: 'integer', minimum: 0, maximum: INT4.max } }, required: ['name', 'limit'] },
  poolsUnset: { method: 'DELETE', path: '/api/pools/:name', scope: 'admin', fields: { name: text() }, required: ['name'] },
  projectsList: { method: 'GET', path: '/api/projects', scope: 'read', fields: {} },
  projectsSet: { method: 'POST', path: '/api/projects/:name', scope: 'admin', fields: { name: text(), weight: { type: 'number', minimum: LOAD_MIN, maximum: 1_000_000 } }, required: ['name', 'weight'] },
  groupsList: { method: 'GET', path: '/api/groups', scope: 'read', fields: {} },
  groupsSet: {
    method: 'POST',
    path: '/api/groups/:name',
    scope: 'admin',
    fields: { name: text(), attributes: { type: 'object', maxProperties: 64, propertyNames: { maxLength: 128, pattern: SAFE_TEXT_PATTERN }, additionalProperties: { anyOf: [text(), { type: 'null' }] } }, exclusive: { type: 'boolean' } },
    required: ['name'],
  },
  placementsList: { method: 'GET', path: '/api/placement', scope: 'read', fields: {} },
  placementsBind: {
    method: 'POST',
    path: '/api/placement/bind',
    scope: 'admin',
    fields: {
      path: text(1000),
      requirement: {
        type: 'object',
        additionalProperties: false,
        properties: {
          group: { anyOf: [text(128), texts] },
          selectors: { type: 'object', maxProperties: 64, propertyNames: { maxLength: 128, pattern: SAFE_TEXT_PATTERN }, additionalProperties: texts },
          labels: texts,
          executors: texts,
        },
      },
    },
    required: ['path', 'requirement'],
  },
  placementsUnbind: { method: 'POST', path: '/api/placement/unbind', scope: 'admin', fields: { path: text(1000) }, required: ['path'] },
  fleetQuiesce: postureSpec('fleetQuiesce'),
  fleetResume: postureSpec('fleetResume'),
  platformHalt: postureSpec('platformHalt'),
  platformQuiesce: postureSpec('platformQuiesce'),
  platformResume: postureSpec('platformResume'),
  replicaQuiesce: { method: 'POST', path: '/api/admin/replicas/:id/quiesce', scope: 'levers', fields: { id: text() }, required: ['id'] },
  replicaResume: { method: 'POST', path: '/api/admin/replicas/:id/resume', scope: 'levers', fields: { id: text() }, required: ['id'] },
  adminAudit: { method: 'GET', path: '/api/admin/audit', scope: 'admin', fields: { since: text(64), actor: text(200), limit: { type: 'integer', minimum: 1, maximum: 10_000 } } },
  adminStatus: { method: 'GET', path: '/api/admin/status', scope: 'read', fields: {} },
  tokensCreate: {
    method: 'POST',
    path: '/api/tokens',
    scope: 'admin',
    fields: { kind: { type: 'string', enum: ['admin', 'registration'] }, name: text(), scope: { type: 'string', enum: ['read', 'runs', 'levers', 'admin'] }, groups: texts, expires: text(32) },
    required: ['kind', 'name'],
  },
  tokensList: { method: 'GET', path: '/api/tokens', scope: 'admin', fields: {} },
  tokensRevoke: { method: 'POST', path: '/api/tokens/:id/revoke', scope: 'admin', fields: { id: text(80), runners: { type: 'boolean' } }, required: ['id'] },
  templatesPut: {
    method: 'POST',
    path: '/api/templates',
    scope: 'runs',
    fields: { file: { type: 'string', minLength: 1, maxLength: 1_048_576, pattern: SAFE_TEXT_PATTERN }, name: text(100), maxConcurrentRuns: { type: 'integer', minimum: 1, maximum: 1_000_000 }, dailyCeiling: { type: 'integer', minimum: 1, maximum: 1_000_000 } },
    required: ['file'],
    bodyLimit: 2 * 1024 * 1024,
  },
  templatesList: { method: 'GET', path: '/api/templates', scope: 'read', fields: {} },
  templatesShow: { method: 'GET', path: '/api/templates/:name', scope: 'read', fields: { name: text(100), version: { type: 'integer', minimum: 1, maximum: INT4.max } }, required: ['name'] },
  templatesRemove: { method: 'DELETE', path: '/api/templates/:name', scope: 'runs', fields: { name: text(100) }, required: ['name'] },
  triggersScheduleAdd: {
    method: 'POST',
    path: '/api/triggers/schedules',
    scope: 'runs',
    fields: { template: text(100), cron: text(200), tz: text(64), overlap: text(16), catchUp: text(16), set: { type: 'array', items: text(10_000), maxItems: 256 } },
    required: ['template', 'cron'],
  },
  triggersOnceAdd: { method: 'POST', path: '/api/triggers/once', scope: 'runs', fields: { template: text(100), at: text(64), set: { type: 'array', items: text(10_000), maxItems: 256 } }, required: ['template', 'at'] },
  triggersWebhookAdd: {
    method: 'POST',
    path: '/api/triggers/webhooks',
    scope: 'runs',
    fields: { template: text(100), set: { type: 'array', items: text(10_000), maxItems: 256 }, map: { type: 'array', items: text(1_000), maxItems: 64 } },
    required: ['template'],
  },
  triggersWebhookRotate: { method: 'POST', path: '/api/triggers/webhooks/:id/rotate', scope: 'admin', fields: { id }, required: ['id'] },
  triggersList: { method: 'GET', path: '/api/triggers', scope: 'read', fields: {} },
  triggersShow: { method: 'GET', path: '/api/triggers/:id', scope: 'read', fields: { id, limit: { type: 'integer', minimum: 1, maximum: 10_000 } }, required: ['id'] },
  triggersEnable: { method: 'POST', path: '/api/triggers/:id/enable', scope: 'runs', fields: { id }, required: ['id'] },
  triggersDisable: { method: 'POST', path: '/api/triggers/:id/disable', scope: 'runs', fields: { id }, required: ['id'] },
  triggersRemove: { method: 'DELETE', path: '/api/triggers/:id', scope: 'runs', fields: { id }, required: ['id'] },
  adminReconcile: { method: 'POST', path: '/api/admin/reconcile', scope: 'levers', fields: {} },
} satisfies Record<string, VerbSpec>;

/** Every verb of the operations layer, by name. */
export type Verb = keyof typeof SPECS;

export const VERBS: Record<Verb, VerbSpec> = SPECS;

/** The `:name` fields of a path. */
export function pathParams(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]);
}
