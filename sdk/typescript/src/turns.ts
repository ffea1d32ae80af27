/**
 * inTurn runs fn after every call of the same key made before it has
 * settled, so that the reads and folds of one thread never overlap; the
 * key is forgotten once its last call settled.
 */
export function inTurn(busy: Map<string, Promise<void>>, key: string, fn: () => Promise<void>): Promise<void> {
  const prev = busy.get(key) ?? Promise.resolve();
  const next = prev.then(fn);
  const settled = next.catch(() => undefined);
  busy.set(key, settled);
  void settled.then(() => {
    if (busy.get(key) === settled) busy.delete(key);
  });
  return next;
}
