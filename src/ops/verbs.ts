import { adminAudit } from './domain/audit.js';
import { fleetDemand, fleetWhatIf } from './domain/capacity.js';
import { adminQueue, fleetRunners } from './domain/console.js';
import { fleetDrain, fleetDrainOutstanding, fleetDrainPreview, fleetQueue, fleetRunnersRemove, fleetUndrain } from './domain/fleet.js';
import { adminStatus, platformHalt, platformQuiesce, platformResume, replicaQuiesce, replicaResume, fleetQuiesce, fleetResume } from './domain/levers.js';
import { groupsList, groupsSet, placementsBind, placementsList, placementsUnbind, poolsList, poolsSet, poolsUnset, projectsList, projectsSet } from './domain/policy.js';
import { runsCancel, runsList, runsLogs, runsRetry, runsShow, runsSubmit } from './domain/runs.js';
import { tokensCreate, tokensList, tokensRevoke } from './domain/tokens.js';
import {
  adminReconcile,
  templatesList,
  templatesPut,
  templatesRemove,
  templatesShow,
  triggersDisable,
  triggersEnable,
  triggersList,
  triggersOnceAdd,
  triggersRemove,
  triggersScheduleAdd,
  triggersShow,
  triggersWebhookAdd,
  triggersWebhookRotate,
} from './domain/triggers.js';
import type { OpsContext } from './domain/context.js';
import type { Verb } from './verb-specs.js';

export { ADMIN_QUEUE_MAX_LIMIT, pathParams, VERBS, type FieldSchema, type Verb, type VerbSpec } from './verb-specs.js';

/**
 * Every verb's domain function, by verb name. The store transport calls these directly; the HTTP
 * routes call them for a request; the HTTP transport reaches them through VERBS (src/ops/verb-specs.ts).
 */
export const DOMAIN = {
  runsSubmit,
  runsShow,
  runsList,
  runsLogs,
  runsRetry,
  runsCancel,
  fleetDrain,
  fleetUndrain,
  fleetDrainPreview,
  fleetDrainOutstanding,
  fleetRunnersRemove,
  fleetQueue,
  fleetDemand,
  fleetWhatIf,
  fleetRunners,
  adminQueue,
  poolsList,
  poolsSet,
  poolsUnset,
  projectsList,
  projectsSet,
  groupsList,
  groupsSet,
  placementsList,
  placementsBind,
  placementsUnbind,
  fleetQuiesce,
  fleetResume,
  platformHalt,
  platformQuiesce,
  platformResume,
  replicaQuiesce,
  replicaResume,
  adminStatus,
  adminAudit,
  tokensCreate,
  tokensList,
  tokensRevoke,
  templatesPut,
  templatesList,
  templatesShow,
  templatesRemove,
  triggersScheduleAdd,
  triggersOnceAdd,
  triggersWebhookAdd,
  triggersWebhookRotate,
  triggersList,
  triggersShow,
  triggersEnable,
  triggersDisable,
  triggersRemove,
  adminReconcile,
} satisfies Record<Verb, (ctx: OpsContext, input: any) => Promise<unknown>>;
