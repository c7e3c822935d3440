/**
 * Which EC2 instance this process runs on, from the instance metadata service with IMDSv2 (the boxes
 * require session tokens: sst.config.ts `httpTokens: 'required'`). The endpoint is the one the AWS SDK
 * itself reads, AWS_EC2_METADATA_SERVICE_ENDPOINT, so a test can serve it on loopback.
 */
import { InstanceId } from '../../../shared/boxes/ec2-instance.ts';

const DEFAULT_IMDS = 'http://169.254.169.254';

export async function instanceIdFromImds(endpoint = process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT ?? DEFAULT_IMDS, timeoutMs = 2000): Promise<string> {
  const base = endpoint.replace(/\/+$/, '');
  const fail = (what: string) => new Error(`cannot read this instance's id from the metadata service at ${base}: ${what}`);
  let res: Response;
  try {
    res = await fetch(`${base}/latest/api/token`, { method: 'PUT', headers: { 'x-aws-ec2-metadata-token-ttl-seconds': '60' }, signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw fail(`the session token request answered ${res.status}`);
    const token = await res.text();
    res = await fetch(`${base}/latest/meta-data/instance-id`, { headers: { 'x-aws-ec2-metadata-token': token }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw (err as Error).message.startsWith('cannot read') ? err : fail((err as Error).message);
  }
  if (!res.ok) throw fail(`instance-id answered ${res.status}`);
  const id = InstanceId.safeParse((await res.text()).trim());
  if (!id.success) throw fail(id.error.issues[0]!.message);
  return id.data;
}
