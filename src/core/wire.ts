/** A value as it crosses the wire: dates become ISO strings, undefined fields vanish. */
export type Wire<T> = T extends Date
  ? string
  : T extends (infer U)[]
    ? Wire<U>[]
    : T extends Map<any, any>
      ? Record<string, never>
      : T extends object
        ? { [K in keyof T]: Wire<T[K]> }
        : T;

/** The wire form of a value, so the store transport answers exactly what the HTTP transport does. */
export function wire<T>(value: T): Wire<T> {
  return value === undefined ? (undefined as Wire<T>) : (JSON.parse(JSON.stringify(value)) as Wire<T>);
}
