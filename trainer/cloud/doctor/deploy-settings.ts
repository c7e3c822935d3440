/**
 * The deploy settings the preflight needs, read from the same ESOPT_* variables with the same defaults as
 * sst.config.ts's DeployConfig (which SST evaluates alone, so it cannot import this);
 * test/cloud/cloud-doctor.test.ts synthesizes the stack with an empty environment and checks both agree.
 */
import { z } from 'zod';

export const DoctorSettings = z.object({
  ESOPT_AWS_REGION: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/).default('us-east-1'),
  ESOPT_TRAINER_INSTANCE_TYPE: z.string().regex(/^[a-z0-9]+\.[a-z0-9]+$/).default('g5.xlarge'),
  ESOPT_EPISODE_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(200),
  ESOPT_API_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(10),
  ESOPT_REPLICAS: z.coerce.number().int().min(1).max(16).default(1),
});
export type DoctorSettings = z.output<typeof DoctorSettings>;
