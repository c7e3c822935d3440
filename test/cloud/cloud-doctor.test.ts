/**
 * `esopt cloud doctor` against recorded AWS responses (test/fixtures/aws-doctor/) served on loopback to the
 * real SDK v3 clients: a new account (G vCPU quota 0, Lambda limit 10, a zone without the type), a raised
 * one, a denied call and a region without a default VPC — each prerequisite one line, each failure its fix —
 * and the build tools the rehearsal would compile its Lambda runtime client with, which never fail a deploy.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { command } from '../../trainer/cli/commands/cloud-doctor.ts';
import { DoctorSettings } from '../../trainer/cloud/doctor/deploy-settings.ts';
import type { Finding } from '../../trainer/cloud/doctor/prerequisites.ts';
import { evaluate } from '../../trainer/dev/rehearsal/sst-stack.ts';
import { recordedAws, type RecordedAws, type Recording } from './helpers/recorded-aws.ts';

const saved = { ...process.env };
let aws: RecordedAws | undefined;
afterEach(async () => {
  await aws?.close();
  aws = undefined;
});
afterAll(() => {
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
});

const base: Record<string, Recording> = {
  'sts:GetCallerIdentity': { file: 'sts-GetCallerIdentity.xml' },
  'ec2:DescribeInstanceTypes': { file: 'ec2-DescribeInstanceTypes-g5.xlarge.xml' },
  'ec2:DescribeInstances': { file: 'ec2-DescribeInstances-one-g4dn.xml' },
  'ec2:DescribeAddresses': { file: 'ec2-DescribeAddresses-two.xml' },
  'ec2:DescribeVpcs': { file: 'ec2-DescribeVpcs-default.xml' },
  'ec2:DescribeSubnets': { file: 'ec2-DescribeSubnets-default.xml' },
  'ec2:DescribeInstanceTypeOfferings': { file: 'ec2-DescribeInstanceTypeOfferings-g5-no-e.xml' },
  'ec2:DescribeImages': { file: 'ec2-DescribeImages-dlami.xml' },
  'quotas:ec2/L-DB2E81BA': { file: 'quotas-ec2-L-DB2E81BA-new-account.json' },
  'quotas:ec2/L-0263D0A3': { file: 'quotas-ec2-L-0263D0A3.json' },
  'lambda:GetAccountSettings': { file: 'lambda-GetAccountSettings-new-account.json' },
};
const raised: Record<string, Recording> = {
  ...base,
  'quotas:ec2/L-DB2E81BA': { file: 'quotas-ec2-L-DB2E81BA-raised.json' },
  'lambda:GetAccountSettings': { file: 'lambda-GetAccountSettings-raised.json' },
  'ec2:DescribeInstanceTypeOfferings': { file: 'ec2-DescribeInstanceTypeOfferings-g5-all.xml' },
};

async function doctor(recordings: Record<string, Recording>, env: Record<string, string> = {}, ...argv: string[]) {
  aws = await recordedAws(recordings);
  for (const k of Object.keys(process.env)) if (k.startsWith('ESOPT_') || k.startsWith('AWS_')) delete process.env[k];
  Object.assign(process.env, { AWS_ENDPOINT_URL: aws.url, AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'doctor-test', ...env });
  const out: string[] = [];
  const code = await command.run(['--json', ...argv], { stdout: (t) => out.push(t), stderr: () => {}, readStdin: async () => '' });
  const report = JSON.parse(out.join('')) as { ok: boolean; findings: Finding[] };
  const by = (check: string) => {
    const f = report.findings.find((x) => x.check === check);
    if (!f) throw new Error(`no finding ${check}: ${report.findings.map((x) => x.check).join(', ')}`);
    return f;
  };
  return { code, report, by, text: async () => {
    const lines: string[] = [];
    await command.run(argv, { stdout: (t) => lines.push(t), stderr: () => {}, readStdin: async () => '' });
    return lines.join('\n');
  } };
}

describe('esopt cloud doctor', () => {
  it('names each prerequisite a new account misses, with its fix', async () => {
    const { code, by } = await doctor(base);
    expect(code).toBe(1);
    expect(by('credentials')).toMatchObject({ ok: true, detail: expect.stringContaining('123456789012') });
    expect(by('instance type')).toMatchObject({ ok: true, detail: 'g5.xlarge: 4 vCPUs, 1 GPU, x86_64' });
    // 0 G vCPUs granted; the running g4dn.xlarge (4) counts against the same quota, the m7i does not
    expect(by('vCPU quota')).toMatchObject({ ok: false, detail: expect.stringContaining('0 vCPUs, 4 in use; 1 × g5.xlarge need 4') });
    expect(by('vCPU quota').fix).toContain('--quota-code L-DB2E81BA --desired-value 8 --region us-east-1');
    expect(by('Lambda concurrency')).toMatchObject({ ok: false, detail: expect.stringContaining('account limit 10') });
    expect(by('Lambda concurrency').fix).toMatch(/lower ESOPT_EPISODE_CONCURRENCY to 0 .*--desired-value 310/);
    expect(by('Elastic IPs')).toMatchObject({ ok: true, detail: '2 of 5 allocated (0 this stack\'s); ESOPT_REPLICAS = 1 needs 1 more' });
    expect(by('default VPC')).toMatchObject({ ok: true, detail: expect.stringContaining('vpc-0a1b2c3d') });
    expect(by('availability zones')).toMatchObject({ ok: false, detail: expect.stringContaining('not offered in us-east-1e') });
    expect(by('availability zones').fix).toContain('ESOPT_TRAINER_ZONE=us-east-1a');
    // the newest of the published images
    expect(by('box image')).toMatchObject({ ok: true, detail: expect.stringContaining('ami-0bbbbbbbbbbbbbbb2') });
    expect(by('GNU tar').ok).toBe(true);
    expect(by('Node')).toMatchObject({ ok: process.versions.node.startsWith('22.') });
    expect(aws!.asked).toEqual(expect.arrayContaining(Object.keys(base)));
  });

  it('passes every account check once the quotas are raised, and renders one line each', async () => {
    const { by, report, text } = await doctor(raised, { ESOPT_REPLICAS: '3' }, '--stage', 'prod');
    for (const check of ['credentials', 'instance type', 'vCPU quota', 'Lambda concurrency', 'Elastic IPs', 'default VPC', 'availability zones', 'box image']) expect(by(check).ok, check).toBe(true);
    // three boxes of 4 vCPUs beside the running 4; the stage's own address is reused
    expect(by('vCPU quota').detail).toContain('64 vCPUs, 4 in use; 3 × g5.xlarge need 12');
    expect(by('Elastic IPs').detail).toBe("2 of 5 allocated (1 this stack's); ESOPT_REPLICAS = 3 needs 2 more");
    expect(report.ok).toBe(process.versions.node.startsWith('22.'));
    const lines = (await text()).split('\n');
    expect(lines.filter((l) => /^(ok  |FAIL) /.test(l))).toHaveLength(11);
  });

  it('names the build tools the rehearsal lacks here, with the Debian command, without failing the deploy', async () => {
    // A PATH with GNU tar and only some of the tools aws-lambda-ric's first install compiles with.
    const bin = mkdtempSync(join(tmpdir(), 'esopt-doctor-bin-'));
    for (const [name, target] of [['tar', execFileSync('sh', ['-c', 'command -v tar']).toString().trim()], ['make', '/bin/true'], ['cmake', '/bin/true']]) symlinkSync(target!, join(bin, name!));
    const path = process.env.PATH;
    try {
      const { by, report } = await doctor(raised, { PATH: bin });
      expect(by('rehearsal build tools')).toEqual({
        check: 'rehearsal build tools',
        ok: true,
        detail: 'not on PATH: autoconf, automake, libtoolize (libtool), g++, python3; only `esopt dev rehearse` needs them (its Lambda runtime client, aws-lambda-ric, compiles on first use), a deploy does not',
        fix: 'sudo apt-get install autoconf automake libtool cmake make g++ python3 (Debian), before a rehearsal',
      });
      expect(by('GNU tar').ok).toBe(true);
      expect(report.ok).toBe(process.versions.node.startsWith('22.'));
    } finally {
      process.env.PATH = path;
      rmSync(bin, { recursive: true, force: true });
    }
  });

  it('says so in one line when the rehearsal\'s build tools are all here', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'esopt-doctor-bin-'));
    for (const name of ['autoconf', 'automake', 'libtoolize', 'cmake', 'make', 'g++', 'python3']) symlinkSync('/bin/true', join(bin, name));
    const path = process.env.PATH;
    try {
      const { by } = await doctor(raised, { PATH: `${bin}:${path}` });
      expect(by('rehearsal build tools')).toMatchObject({ ok: true, detail: expect.stringMatching(/^autoconf, automake, libtool, cmake, make, g\+\+, python3 on PATH/) });
      expect(by('rehearsal build tools').fix).toBeUndefined();
    } finally {
      process.env.PATH = path;
      rmSync(bin, { recursive: true, force: true });
    }
  });

  it('reports a denied call as its own finding and still checks the rest', async () => {
    const { by } = await doctor({ ...raised, 'ec2:DescribeAddresses': { status: 403, file: 'ec2-UnauthorizedOperation.xml' } });
    expect(by('Elastic IPs')).toMatchObject({ ok: false, detail: expect.stringMatching(/^could not check: UnauthorizedOperation: You are not authorized/) });
    expect(by('Elastic IPs').fix).toContain('ec2:DescribeAddresses');
    expect(by('vCPU quota').ok).toBe(true);
  });

  it('says how to make a missing default VPC', async () => {
    const { by } = await doctor({ ...raised, 'ec2:DescribeVpcs': { file: 'ec2-DescribeVpcs-none.xml' } });
    expect(by('default VPC')).toMatchObject({ ok: false, fix: 'aws ec2 create-default-vpc --region us-east-1' });
  });

  it('refuses bad deploy settings naming the variable', async () => {
    await expect(doctor(raised, { ESOPT_REPLICAS: '0' })).rejects.toThrow(/ESOPT_REPLICAS/);
  });

  it('reads the deploy settings with the defaults the stack uses', async () => {
    const { one, recorded } = await evaluate();
    const d = DoctorSettings.parse({});
    expect(one('aws.ec2.Instance', 'Trainer').args.instanceType).toBe(d.ESOPT_TRAINER_INSTANCE_TYPE);
    expect((one('sst.aws.Function', 'Episode').args.concurrency as { reserved: number }).reserved).toBe(d.ESOPT_EPISODE_CONCURRENCY);
    // The Api function has reserved concurrency of its own, counted in the account's limit.
    expect((one('sst.aws.Function', 'Api').args.concurrency as { reserved: number }).reserved).toBe(d.ESOPT_API_CONCURRENCY);
    expect(recorded.filter((r) => r.type === 'aws.ec2.Instance')).toHaveLength(d.ESOPT_REPLICAS);
  });
});
