/** GET /boxes: each trainer and replica box's boot state, as the box wrote it to the bucket. */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { BoxBootState } from '../../shared/schemas/box-boot.ts';
import { readBoxBootStates } from './box-reader.ts';
import type { ApiDeps } from './deps.ts';
import { errors, json, secured } from './openapi-common.ts';

export const BoxList = z.object({
  boxes: z.array(BoxBootState),
  /** Boot-state objects that do not parse, by key. */
  unreadable: z.array(z.object({ key: z.string(), error: z.string() })),
});

export function registerBoxRoutes(app: OpenAPIHono, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/boxes',
      tags: ['boxes'],
      security: secured,
      summary: "The boxes' boot states: the step each reached, ready or failed, with the error and the log's last lines (token redacted)",
      responses: { 200: json(BoxList, 'Every box that has written a boot state, the trainer first'), 401: errors[401] },
    }),
    async (c) => c.json(await readBoxBootStates(deps.store), 200),
  );
}
