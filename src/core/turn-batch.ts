/** The most keys one load carries; more wait for the next. */
const MAX_KEYS = 1000;

/**
 * Lookups asked for during one turn of the event loop, answered by one load of all their keys
 * (a DataLoader without its cache: every lookup reads fresh, after it was asked). Callers of the
 * same key share the answer; a failed load fails every lookup it carried.
 */
export function turnBatcher<K, V>(load: (keys: K[]) => Promise<Map<K, V>>): (key: K) => Promise<V | undefined> {
  const waiting = new Map<K, Array<{ resolve: (v: V | undefined) => void; reject: (err: unknown) => void }>>();
  let scheduled = false;
  const flush = async () => {
    scheduled = false;
    const batch = new Map([...waiting].slice(0, MAX_KEYS));
    for (const k of batch.keys()) waiting.delete(k);
    if (waiting.size > 0) schedule();
    try {
      const found = await load([...batch.keys()]);
      for (const [k, callers] of batch) for (const c of callers) c.resolve(found.get(k));
    } catch (err) {
      for (const callers of batch.values()) for (const c of callers) c.reject(err);
    }
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => void flush());
  };
  return (key) =>
    new Promise((resolve, reject) => {
      const callers = waiting.get(key);
      if (callers) callers.push({ resolve, reject });
      else waiting.set(key, [{ resolve, reject }]);
      schedule();
    });
}
