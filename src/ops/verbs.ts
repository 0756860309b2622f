import { adminAudit } from './audit.js';
import { fleetDemand, fleetWhatIf } from './capacity.js';
import { adminQueue, fleetRunners } from './console.js';
import { fleetDrain, fleetDrainHeld, fleetDrainPreview, fleetQueue, fleetRunnersRemove, fleetUndrain } from './fleet.js';
import { adminStatus, platformHalt, platformQuiesce, platformResume, replicaQuiesce, replicaResume, serverQuiesce, serverResume } from './levers.js';
import { groupsList, groupsSet, placementsBind, placementsList, placementsUnbind, poolsList, poolsSet, poolsUnset, projectsList, projectsSet } from './policy.js';
import { runsCancel, runsList, runsLogs, runsRetry, runsShow, runsSubmit } from './runs.js';
import { tokensCreate, tokensList, tokensRevoke } from './tokens.js';
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
} from './triggers.js';
import type { OpsContext } from './context.js';
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
  fleetDrainHeld,
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
  serverQuiesce,
  serverResume,
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
