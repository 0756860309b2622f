/** The states a run can be in, as the store keeps them and the API filters by them. */
export const RUN_STATUSES = ['running', 'succeeded', 'failed', 'error', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
