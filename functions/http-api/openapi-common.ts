/** Pieces every route definition shares: the error responses and the Idempotency-Key header. */
import { z } from 'zod';
import { ApiError } from '../../shared/schemas/index.ts';

const error = (description: string) => ({ content: { 'application/json': { schema: ApiError } }, description });

export const errors = {
  400: error('The body or a parameter is invalid; `issues` names every failing field'),
  401: error('Missing or wrong bearer token'),
  404: error('No such id'),
  409: error('Conflicts with the current state'),
  422: error('Well-formed but unusable (e.g. an Idempotency-Key reused with another body)'),
} as const;

export const idempotencyHeader = z.object({
  'idempotency-key': z.string().max(255).optional().meta({ description: 'Retries with the same key and body create nothing twice' }),
});

export const environmentKeyHeader = z.object({
  'x-esopt-environment-key': z
    .string()
    .max(4096)
    .optional()
    .meta({ description: "The key of the endpoint the environment's options name, sent to that origin alone; a deployed stack keeps it in its secret store (never in the bucket)" }),
});

export const secured = [{ bearer: [] as string[] }];

export const json = <S extends z.ZodType>(schema: S, description: string) => ({ content: { 'application/json': { schema } }, description });
