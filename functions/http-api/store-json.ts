/**
 * Moved to shared/store/json.ts, the one JSON helper for the store. Kept only as a re-export for
 * trainer/cloud/box/trainer-box.ts until its owner imports shared/store/json.ts; then delete this file.
 */
export { readAllJson, readJson, writeJson } from '../../shared/store/json.ts';
