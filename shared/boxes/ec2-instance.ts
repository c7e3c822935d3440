/**
 * One EC2 instance's power, as the stack uses it: the trainer box stops itself when idle, the Api function
 * starts it when work is queued. Each role may do exactly that on exactly that instance (sst.config.ts),
 * so neither may describe instances: the answer to Start/StopInstances says the state before and after.
 * The SDK is imported by the first request, as the other cloud adapters do.
 */
import type { EC2Client } from '@aws-sdk/client-ec2';
import { z } from 'zod';
import { DEFAULT_AWS_REGION } from '../store/aws-region.ts';

export const InstanceId = z.string().regex(/^i-[0-9a-f]{8,17}$/, 'an EC2 instance id: i- and 8 or 17 hex digits');

export const Ec2InstanceConfig = z
  .object({
    instanceId: InstanceId,
    region: z.string().min(1).default(DEFAULT_AWS_REGION),
    /** An EC2-compatible endpoint instead of AWS (tests). */
    endpoint: z.url().optional(),
    maxAttempts: z.number().int().min(1).max(20).default(3),
    /** Static credentials (tests); otherwise the SDK's default provider chain (the role). */
    credentials: z.object({ accessKeyId: z.string().min(1), secretAccessKey: z.string().min(1) }).optional(),
  })
  .strict();
export type Ec2InstanceConfigInput = z.input<typeof Ec2InstanceConfig>;

/** EC2's instance state names: pending, running, stopping, stopped, shutting-down, terminated. */
export interface PowerChange {
  previous: string;
  current: string;
}

type Ec2Sdk = typeof import('@aws-sdk/client-ec2');

export class Ec2Instance {
  readonly config: z.infer<typeof Ec2InstanceConfig>;
  private connection?: Promise<{ sdk: Ec2Sdk; client: EC2Client }>;

  constructor(config: Ec2InstanceConfigInput) {
    const parsed = Ec2InstanceConfig.safeParse(config);
    if (!parsed.success) throw new Error(`invalid EC2 instance settings: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(settings)'}: ${i.message}`).join('; ')}`);
    this.config = parsed.data;
  }

  private connect(): Promise<{ sdk: Ec2Sdk; client: EC2Client }> {
    this.connection ??= import('@aws-sdk/client-ec2').then((sdk) => {
      const { region, endpoint, maxAttempts, credentials } = this.config;
      return { sdk, client: new sdk.EC2Client({ region, endpoint, maxAttempts, credentials }) };
    });
    return this.connection;
  }

  /** Starting a running or pending instance changes nothing; a stopping one is refused (IncorrectInstanceState). */
  async start(): Promise<PowerChange> {
    const { sdk, client } = await this.connect();
    const out = await client.send(new sdk.StartInstancesCommand({ InstanceIds: [this.config.instanceId] }));
    return this.change(out.StartingInstances);
  }

  async stop(): Promise<PowerChange> {
    const { sdk, client } = await this.connect();
    const out = await client.send(new sdk.StopInstancesCommand({ InstanceIds: [this.config.instanceId] }));
    return this.change(out.StoppingInstances);
  }

  private change(list: { InstanceId?: string; PreviousState?: { Name?: string }; CurrentState?: { Name?: string } }[] | undefined): PowerChange {
    const mine = list?.find((i) => i.InstanceId === this.config.instanceId);
    if (!mine) throw new Error(`EC2 did not answer for ${this.config.instanceId}`);
    return { previous: mine.PreviousState?.Name ?? 'unknown', current: mine.CurrentState?.Name ?? 'unknown' };
  }

  destroy(): void {
    void this.connection?.then(({ client }) => client.destroy(), () => {});
  }
}
