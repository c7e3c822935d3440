/**
 * `esopt tasks push`: a JSONL file of one environment's tasks, validated line by line by that environment's
 * taskSchema (parse-suite-file.ts) before anything is stored, then published by content (suite-catalog.ts).
 * The stored tasks are the schema's parsed values, so defaults are filled in and the hash is of what runs see.
 */
import { loadEnvironment } from '../index.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { EnvironmentName, TaskSuiteName } from '../../shared/schemas/index.ts';
import { parseSuiteJsonl } from './parse-suite-file.ts';
import { publishSuite, type PublishedSuite } from './suite-catalog.ts';

export async function pushSuite(store: ObjectStore, o: { name: string; environment: string; text: string }): Promise<PublishedSuite> {
  const name = TaskSuiteName.safeParse(o.name);
  if (!name.success) throw new Error(`task suite name ${JSON.stringify(o.name)}: ${name.error.issues[0]?.message}`);
  const environment = EnvironmentName.safeParse(o.environment);
  if (!environment.success) throw new Error(`environment ${JSON.stringify(o.environment)}: ${environment.error.issues[0]?.message}`);
  const definition = await loadEnvironment(environment.data);
  const tasks = parseSuiteJsonl(o.text, definition.taskSchema, environment.data);
  return publishSuite(store, name.data, { environment: environment.data, tasks });
}
