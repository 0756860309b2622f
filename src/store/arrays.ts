/**
 * A text[] column's value from a jsonb array of strings, NULL when the array is empty. Most steps
 * need nothing and are in no pool: NULL is a bit in the row's null bitmap where '{}' costs 13 B,
 * in a step, queue or lease row. Readers map NULL to [] (and `x = ANY(NULL)` is never true).
 */
export const textArrayOrNullSql = (jsonArray: string): string => `nullif(ARRAY(SELECT jsonb_array_elements_text(${jsonArray})), '{}')`;
