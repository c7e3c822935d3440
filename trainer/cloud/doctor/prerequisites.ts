/**
 * What a first deploy needs of the account and of the deploying machine, judged from facts gathered
 * elsewhere (aws-facts.ts, local-facts.ts): one line each, and for a failure the fix. Pure, so each rule is
 * tested on its own.
 */
import { RIC_APT_COMMAND } from './build-tools.ts';
import type { DoctorSettings } from './deploy-settings.ts';

/** A fact, or why it could not be learned (a denied call is a finding too). */
export type Fact<T> = { ok: true; value: T } | { ok: false; error: string };

export interface DoctorFacts {
  account: Fact<{ id: string; arn: string }>;
  instanceType: Fact<{ vcpus: number; gpus: number; architectures: string[] } | null>;
  /** The running On-Demand vCPU quota of the instance type's family; null where no quota is mapped. */
  vcpuQuota: Fact<{ code: string; name: string; value: number; inUse: number } | null>;
  lambda: Fact<{ concurrentExecutions: number; unreserved: number }>;
  elasticIps: Fact<{ quota: number; allocated: number; ours: number }>;
  defaultVpc: Fact<{ id: string; subnetZones: string[] } | null>;
  offeredZones: Fact<string[]>;
  ami: Fact<{ id: string; name: string } | null>;
  tar: Fact<string>;
  node: string;
  /** The build tools (build-tools.ts) not on PATH, as command and Debian package. */
  rehearsalBuildTools: { missing: Array<{ package: string; command: string }> };
}

export interface Finding {
  check: string;
  ok: boolean;
  detail: string;
  /** What to do, for a failure. */
  fix?: string;
}

/** Lambda keeps this much of the account's concurrency unreserved; a reservation may not eat into it. */
export const LAMBDA_UNRESERVED_MINIMUM = 100;

const denied = (check: string, error: string, permission: string): Finding => ({
  check,
  ok: false,
  detail: `could not check: ${error}`,
  fix: `run the doctor with credentials allowed ${permission} (the deploy needs more than that anyway)`,
});

export function findings(s: DoctorSettings, f: DoctorFacts): Finding[] {
  const type = s.ESOPT_TRAINER_INSTANCE_TYPE;
  const boxes = s.ESOPT_REPLICAS;
  const out: Finding[] = [];

  out.push(f.account.ok
    ? { check: 'credentials', ok: true, detail: `account ${f.account.value.id} as ${f.account.value.arn}` }
    : { check: 'credentials', ok: false, detail: f.account.error, fix: 'configure AWS credentials (AWS_PROFILE, or `aws configure sso`) for the account to deploy to' });

  if (!f.instanceType.ok) out.push(denied('instance type', f.instanceType.error, 'ec2:DescribeInstanceTypes'));
  else if (f.instanceType.value === null) out.push({ check: 'instance type', ok: false, detail: `${type} does not exist in ${s.ESOPT_AWS_REGION}`, fix: 'set ESOPT_TRAINER_INSTANCE_TYPE to a type this region offers (g5.xlarge, g6.xlarge, …)' });
  else {
    const t = f.instanceType.value;
    const x86 = t.architectures.includes('x86_64');
    out.push({
      check: 'instance type',
      ok: x86,
      detail: `${type}: ${t.vcpus} vCPUs, ${t.gpus} GPU${t.gpus === 1 ? '' : 's'}, ${t.architectures.join('/')}`,
      ...(x86 ? {} : { fix: 'choose an x86_64 type: the box image and onnxruntime-node\'s GPU builds are x86_64' }),
    });
    if (!f.vcpuQuota.ok) out.push(denied('vCPU quota', f.vcpuQuota.error, 'servicequotas:GetServiceQuota and ec2:DescribeInstances'));
    else if (f.vcpuQuota.value === null) out.push({ check: 'vCPU quota', ok: true, detail: `no On-Demand vCPU quota is mapped for ${type}'s family: not checked` });
    else {
      const q = f.vcpuQuota.value;
      const need = t.vcpus * boxes;
      const ok = q.value - q.inUse >= need;
      out.push({
        check: 'vCPU quota',
        ok,
        detail: `${q.name} (${q.code}): ${q.value} vCPUs, ${q.inUse} in use; ${boxes} × ${type} need ${need}`,
        ...(ok ? {} : { fix: `request ${q.inUse + need} or more: aws service-quotas request-service-quota-increase --service-code ec2 --quota-code ${q.code} --desired-value ${q.inUse + need} --region ${s.ESOPT_AWS_REGION} (a new account often has 0 for G and P)` }),
      });
    }
  }

  if (!f.lambda.ok) out.push(denied('Lambda concurrency', f.lambda.error, 'lambda:GetAccountSettings'));
  else {
    const need = s.ESOPT_EPISODE_CONCURRENCY + s.ESOPT_API_CONCURRENCY + LAMBDA_UNRESERVED_MINIMUM;
    const ok = f.lambda.value.concurrentExecutions >= need;
    out.push({
      check: 'Lambda concurrency',
      ok,
      detail: `account limit ${f.lambda.value.concurrentExecutions} (${f.lambda.value.unreserved} unreserved now); the Episode function reserves ${s.ESOPT_EPISODE_CONCURRENCY}, the Api function ${s.ESOPT_API_CONCURRENCY}, and Lambda keeps ${LAMBDA_UNRESERVED_MINIMUM} unreserved: needs ≥ ${need}`,
      ...(ok ? {} : { fix: `lower ESOPT_EPISODE_CONCURRENCY to ${Math.max(0, f.lambda.value.concurrentExecutions - LAMBDA_UNRESERVED_MINIMUM - s.ESOPT_API_CONCURRENCY)} or less, or request a higher limit: aws service-quotas request-service-quota-increase --service-code lambda --quota-code L-B99A9384 --desired-value ${need}` }),
    });
  }

  if (!f.elasticIps.ok) out.push(denied('Elastic IPs', f.elasticIps.error, 'ec2:DescribeAddresses and servicequotas:GetServiceQuota'));
  else {
    const e = f.elasticIps.value;
    // the stack's own addresses (a redeploy) are reused, not allocated again
    const need = Math.max(0, boxes - e.ours);
    const ok = e.quota - e.allocated >= need;
    out.push({
      check: 'Elastic IPs',
      ok,
      detail: `${e.allocated} of ${e.quota} allocated (${e.ours} this stack's); ESOPT_REPLICAS = ${boxes} needs ${need} more`,
      ...(ok ? {} : { fix: `release unused addresses (aws ec2 describe-addresses) or request more: aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-0263D0A3 --desired-value ${e.allocated + need}` }),
    });
  }

  if (!f.defaultVpc.ok) out.push(denied('default VPC', f.defaultVpc.error, 'ec2:DescribeVpcs and ec2:DescribeSubnets'));
  else if (f.defaultVpc.value === null) out.push({ check: 'default VPC', ok: false, detail: `no default VPC in ${s.ESOPT_AWS_REGION}: the boxes launch into it`, fix: `aws ec2 create-default-vpc --region ${s.ESOPT_AWS_REGION}` });
  else out.push({ check: 'default VPC', ok: true, detail: `${f.defaultVpc.value.id}, subnets in ${f.defaultVpc.value.subnetZones.join(', ')}` });

  if (!f.offeredZones.ok) out.push(denied('availability zones', f.offeredZones.error, 'ec2:DescribeInstanceTypeOfferings'));
  else if (f.defaultVpc.ok && f.defaultVpc.value !== null) {
    const offered = new Set(f.offeredZones.value);
    const zones = f.defaultVpc.value.subnetZones;
    const missing = zones.filter((z) => !offered.has(z));
    const none = missing.length === zones.length;
    out.push({
      check: 'availability zones',
      ok: missing.length === 0,
      detail: none
        ? `no zone of the default VPC offers ${type} (offered in: ${f.offeredZones.value.join(', ') || 'none'})`
        : missing.length
          ? `${type} is not offered in ${missing.join(', ')}, where EC2 may place a box (offered in ${zones.filter((z) => offered.has(z)).join(', ')})`
          : `${type} is offered in every zone of the default VPC`,
      ...(missing.length === 0 ? {} : none
        ? { fix: `choose another ESOPT_TRAINER_INSTANCE_TYPE or region` }
        : { fix: `pin the boxes to a zone that offers it: ESOPT_TRAINER_ZONE=${zones.find((z) => offered.has(z))}` }),
    });
  }

  if (!f.ami.ok) out.push(denied('box image', f.ami.error, 'ec2:DescribeImages'));
  else out.push(f.ami.value
    ? { check: 'box image', ok: true, detail: `${f.ami.value.id} (${f.ami.value.name})` }
    : { check: 'box image', ok: false, detail: `the box image is not available in ${s.ESOPT_AWS_REGION}`, fix: 'choose a region the Deep Learning Base AMI is published in, or set the image id (docs/CLOUD.md)' });

  out.push(f.tar.ok && /GNU tar/.test(f.tar.value)
    ? { check: 'GNU tar', ok: true, detail: f.tar.value }
    : { check: 'GNU tar', ok: false, detail: f.tar.ok ? `tar is ${f.tar.value}` : `no tar: ${f.tar.error}`, fix: 'install GNU tar (macOS: brew install gnu-tar, and put its gnubin first on PATH): the box artifact is packed with it' });

  const major = Number(f.node.split('.')[0]);
  out.push(major === 22
    ? { check: 'Node', ok: true, detail: `Node ${f.node}` }
    : { check: 'Node', ok: false, detail: `Node ${f.node}: the functions run on nodejs22.x and their native modules are installed for the deploying Node`, fix: 'deploy from Node 22 (nvm install 22 && nvm use 22)' });

  // Not a deploy's prerequisite, so never a failure: the rehearsal's, said here because the doctor runs where
  // it would (the Lambda runtime client it installs on first use compiles native code).
  const missing = f.rehearsalBuildTools.missing;
  out.push(missing.length === 0
    ? { check: 'rehearsal build tools', ok: true, detail: 'autoconf, automake, libtool, cmake, make, g++, python3 on PATH (`esopt dev rehearse` builds its Lambda runtime client, aws-lambda-ric, with them on first use)' }
    : {
      check: 'rehearsal build tools',
      ok: true,
      detail: `not on PATH: ${missing.map((m) => (m.command === m.package ? m.command : `${m.command} (${m.package})`)).join(', ')}; only \`esopt dev rehearse\` needs them (its Lambda runtime client, aws-lambda-ric, compiles on first use), a deploy does not`,
      fix: `sudo ${RIC_APT_COMMAND} (Debian), before a rehearsal`,
    });
  return out;
}
