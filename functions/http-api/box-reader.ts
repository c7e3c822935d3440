/**
 * The boxes' boot states in the bucket (`boxes/<box>/boot.json`, written by trainer/cloud/box/box-boot.sh),
 * for GET /boxes and `esopt cloud status`. A state that does not parse is reported by key, not thrown: a
 * status page shows what it can.
 */
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { BoxBootState } from '../../shared/schemas/box-boot.ts';

export interface BoxBootStates {
  boxes: BoxBootState[];
  unreadable: { key: string; error: string }[];
}

const decoder = new TextDecoder();

export async function readBoxBootStates(store: ObjectStore): Promise<BoxBootStates> {
  const found = (await store.list(keys.boxes())).filter((k) => /^boxes\/[^/]+\/boot\.json$/.test(k));
  const out: BoxBootStates = { boxes: [], unreadable: [] };
  for (const key of found) {
    const body = await store.get(key);
    if (body === null) continue;
    let parsed;
    try {
      parsed = BoxBootState.safeParse(JSON.parse(decoder.decode(body)));
    } catch (err) {
      out.unreadable.push({ key, error: `not JSON: ${(err as Error).message}` });
      continue;
    }
    if (parsed.success) out.boxes.push(parsed.data);
    else out.unreadable.push({ key, error: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ') });
  }
  // The trainer first, then the replicas in order.
  out.boxes.sort((a, b) => (a.box === 'trainer' ? -1 : b.box === 'trainer' ? 1 : a.box.localeCompare(b.box, 'en', { numeric: true })));
  return out;
}
