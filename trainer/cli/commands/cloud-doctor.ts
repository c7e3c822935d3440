import { z } from 'zod';
import { awsFacts } from '../../cloud/doctor/aws-facts.ts';
import { DoctorSettings } from '../../cloud/doctor/deploy-settings.ts';
import { localFacts } from '../../cloud/doctor/local-facts.ts';
import { findings, type Finding } from '../../cloud/doctor/prerequisites.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command, CommandIo } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';

export function renderFindings(list: readonly Finding[]): string {
  const width = Math.max(...list.map((f) => f.check.length));
  return list.map((f) => `${f.ok ? 'ok  ' : 'FAIL'} ${f.check.padEnd(width)}  ${f.detail}${f.fix ? `\n     ${' '.repeat(width)}  fix: ${f.fix}` : ''}`).join('\n');
}

/**
 * `esopt cloud doctor`: before a deploy, each prerequisite of the stack checked with read-only AWS calls
 * (trainer/cloud/doctor/): one line each, a failure with its fix.
 */
async function run(argv: string[], io: CommandIo): Promise<number> {
  const p = parseFlags(argv, { stage: { type: 'string' } });
  const stage = flag(p.values, 'stage', z.string().regex(/^[a-zA-Z0-9-]+$/).optional());
  const parsed = DoctorSettings.safeParse(process.env);
  if (!parsed.success) throw new UsageError(`invalid deploy settings: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const env = process.env;
  const endpoint = (name: string) => env[`AWS_ENDPOINT_URL_${name}`] ?? env.AWS_ENDPOINT_URL;
  const [aws, local] = await Promise.all([
    awsFacts(parsed.data, { stage, endpoints: { ec2: endpoint('EC2'), sts: endpoint('STS'), lambda: endpoint('LAMBDA'), serviceQuotas: endpoint('SERVICE_QUOTAS') } }),
    localFacts(),
  ]);
  const list = findings(parsed.data, { ...aws, ...local });
  const ok = list.every((f) => f.ok);
  io.stdout(p.json ? JSON.stringify({ ok, region: parsed.data.ESOPT_AWS_REGION, instanceType: parsed.data.ESOPT_TRAINER_INSTANCE_TYPE, findings: list }) : `${renderFindings(list)}\n${ok ? 'ready to deploy' : `${list.filter((f) => !f.ok).length} to fix before \`sst deploy\``}`);
  return ok ? 0 : 1;
}

export const command: Command = {
  name: 'cloud doctor',
  usage:
    'esopt cloud doctor [--stage S] [--json]\n' +
    '  before a deploy: credentials, the instance type and its vCPU quota, Lambda concurrency, Elastic IPs, the default VPC and the zones\n' +
    '  offering the type, the box image, GNU tar and Node 22 here, and (never a failure) the build tools `esopt dev rehearse` needs;\n' +
    '  read-only calls, the ESOPT_* deploy settings as sst.config.ts reads them.\n' +
    '  --stage counts that stage\'s own Elastic IPs as reused. Exit 0 when all pass. Endpoint overrides: AWS_ENDPOINT_URL_{EC2,STS,LAMBDA,SERVICE_QUOTAS}',
  run,
};
