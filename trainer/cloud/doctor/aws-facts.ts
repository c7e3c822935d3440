/**
 * The account's side of the preflight, learned with the AWS SDK: who is calling (STS), the instance type,
 * its family's vCPU quota and what runs against it (Service Quotas, EC2), Lambda's account concurrency,
 * Elastic IPs, the default VPC and which zones offer the type, and the box image. Read-only calls; each
 * fact fails on its own (a denied call is reported, the rest still run).
 */
import type { DoctorSettings } from './deploy-settings.ts';
import type { DoctorFacts, Fact } from './prerequisites.ts';

export interface DoctorEndpoints {
  ec2?: string;
  sts?: string;
  lambda?: string;
  serviceQuotas?: string;
}

/** The stack's image: Ubuntu 22.04 with NVIDIA's driver, published by Amazon (sst.config.ts). */
export const BOX_IMAGE_NAME = 'Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*';

/** EC2's running On-Demand vCPU quotas, by instance family (the letters before the generation digit). */
const VCPU_QUOTAS: Array<{ families: RegExp; code: string; name: string }> = [
  { families: /^(g|vt)$/, code: 'L-DB2E81BA', name: 'Running On-Demand G and VT instances' },
  { families: /^p$/, code: 'L-417A185B', name: 'Running On-Demand P instances' },
  { families: /^(a|c|d|h|i|m|r|t|z)$/, code: 'L-1216C47A', name: 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances' },
];
const ELASTIC_IP_QUOTA = 'L-0263D0A3';

export const familyOf = (instanceType: string): string => /^([a-z]+)/.exec(instanceType)?.[1] ?? '';
export const vcpuQuotaFor = (instanceType: string) => VCPU_QUOTAS.find((q) => q.families.test(familyOf(instanceType))) ?? null;

async function fact<T>(learn: () => Promise<T>): Promise<Fact<T>> {
  try {
    return { ok: true, value: await learn() };
  } catch (err) {
    const e = err as Error;
    return { ok: false, error: `${e.name && e.name !== 'Error' ? `${e.name}: ` : ''}${e.message}` };
  }
}

export async function awsFacts(s: DoctorSettings, o: { endpoints?: DoctorEndpoints; stage?: string } = {}): Promise<Omit<DoctorFacts, 'tar' | 'node' | 'rehearsalBuildTools'>> {
  const [{ EC2Client, DescribeInstanceTypesCommand, DescribeInstancesCommand, DescribeAddressesCommand, DescribeVpcsCommand, DescribeSubnetsCommand, DescribeInstanceTypeOfferingsCommand, DescribeImagesCommand }, { STSClient, GetCallerIdentityCommand }, { LambdaClient, GetAccountSettingsCommand }, { ServiceQuotasClient, GetServiceQuotaCommand }] = await Promise.all([
    import('@aws-sdk/client-ec2'),
    import('@aws-sdk/client-sts'),
    import('@aws-sdk/client-lambda'),
    import('@aws-sdk/client-service-quotas'),
  ]);
  const region = s.ESOPT_AWS_REGION;
  const e = o.endpoints ?? {};
  const common = { region, maxAttempts: 2 };
  const ec2 = new EC2Client({ ...common, ...(e.ec2 ? { endpoint: e.ec2 } : {}) });
  const sts = new STSClient({ ...common, ...(e.sts ? { endpoint: e.sts } : {}) });
  const lambda = new LambdaClient({ ...common, ...(e.lambda ? { endpoint: e.lambda } : {}) });
  const quotas = new ServiceQuotasClient({ ...common, ...(e.serviceQuotas ? { endpoint: e.serviceQuotas } : {}) });
  const type = s.ESOPT_TRAINER_INSTANCE_TYPE;
  const quotaValue = async (serviceCode: string, quotaCode: string) => {
    const r = await quotas.send(new GetServiceQuotaCommand({ ServiceCode: serviceCode, QuotaCode: quotaCode }));
    if (r.Quota?.Value === undefined) throw new Error(`GetServiceQuota ${serviceCode} ${quotaCode}: no value`);
    return r.Quota.Value;
  };
  try {
    const [account, instanceType, vcpuQuota, lambdaSettings, elasticIps, defaultVpc, offeredZones, ami] = await Promise.all([
      fact(async () => {
        const r = await sts.send(new GetCallerIdentityCommand({}));
        return { id: r.Account ?? '?', arn: r.Arn ?? '?' };
      }),
      fact(async () => {
        try {
          const r = await ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: [type as never] }));
          const t = r.InstanceTypes?.[0];
          if (!t) return null;
          return { vcpus: t.VCpuInfo?.DefaultVCpus ?? 0, gpus: (t.GpuInfo?.Gpus ?? []).reduce((a, g) => a + (g.Count ?? 0), 0), architectures: (t.ProcessorInfo?.SupportedArchitectures ?? []).map(String) };
        } catch (err) {
          // EC2 answers an unknown type with InvalidInstanceType
          if ((err as Error).name === 'InvalidInstanceType') return null;
          throw err;
        }
      }),
      fact(async () => {
        const q = vcpuQuotaFor(type);
        if (!q) return null;
        const [value, running] = await Promise.all([
          quotaValue('ec2', q.code),
          ec2.send(new DescribeInstancesCommand({ Filters: [{ Name: 'instance-state-name', Values: ['pending', 'running'] }] })),
        ]);
        let inUse = 0;
        for (const reservation of running.Reservations ?? []) {
          for (const i of reservation.Instances ?? []) {
            if (vcpuQuotaFor(String(i.InstanceType ?? ''))?.code !== q.code) continue;
            inUse += (i.CpuOptions?.CoreCount ?? 0) * (i.CpuOptions?.ThreadsPerCore ?? 1);
          }
        }
        return { code: q.code, name: q.name, value, inUse };
      }),
      fact(async () => {
        const r = await lambda.send(new GetAccountSettingsCommand({}));
        return { concurrentExecutions: r.AccountLimit?.ConcurrentExecutions ?? 0, unreserved: r.AccountLimit?.UnreservedConcurrentExecutions ?? 0 };
      }),
      fact(async () => {
        const [quota, addresses] = await Promise.all([quotaValue('ec2', ELASTIC_IP_QUOTA), ec2.send(new DescribeAddressesCommand({}))]);
        const list = addresses.Addresses ?? [];
        const ours = o.stage ? list.filter((a) => (a.Tags ?? []).some((t) => t.Key === 'Name' && t.Value?.startsWith(`esopt-${o.stage}-`))).length : 0;
        return { quota, allocated: list.length, ours };
      }),
      fact(async () => {
        const vpcs = await ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: 'is-default', Values: ['true'] }] }));
        const vpc = vpcs.Vpcs?.[0];
        if (!vpc?.VpcId) return null;
        const subnets = await ec2.send(new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [vpc.VpcId] }, { Name: 'default-for-az', Values: ['true'] }] }));
        return { id: vpc.VpcId, subnetZones: [...new Set((subnets.Subnets ?? []).map((x) => x.AvailabilityZone ?? '?'))].sort() };
      }),
      fact(async () => {
        const r = await ec2.send(new DescribeInstanceTypeOfferingsCommand({ LocationType: 'availability-zone', Filters: [{ Name: 'instance-type', Values: [type] }] }));
        return (r.InstanceTypeOfferings ?? []).map((x) => x.Location ?? '?').sort();
      }),
      fact(async () => {
        const r = await ec2.send(new DescribeImagesCommand({ Owners: ['amazon'], Filters: [{ Name: 'name', Values: [BOX_IMAGE_NAME] }, { Name: 'state', Values: ['available'] }] }));
        const newest = (r.Images ?? []).sort((a, b) => (b.CreationDate ?? '').localeCompare(a.CreationDate ?? ''))[0];
        return newest?.ImageId ? { id: newest.ImageId, name: newest.Name ?? '' } : null;
      }),
    ]);
    return { account, instanceType, vcpuQuota, lambda: lambdaSettings, elasticIps, defaultVpc, offeredZones, ami };
  } finally {
    for (const c of [ec2, sts, lambda, quotas]) c.destroy();
  }
}
