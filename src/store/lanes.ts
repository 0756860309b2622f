/**
 * src/core/entry.ts's laneOf in SQL, for reads that rebuild the lane of work no longer queued (a
 * completed attempt keeps only its step's priority): system at 100 and above, interactive at 50,
 * bulk below. test/store/lanes.test.ts holds the two definitions together.
 */
export const laneOfSql = (priority: string): string => `CASE WHEN ${priority} >= 100 THEN 0 WHEN ${priority} >= 50 THEN 1 ELSE 2 END`;
