/** Moved to shared/ so the API (functions/) can use it too; kept here for the loop's existing import. */
export { wilsonInterval } from '../../shared/wilson.ts';
