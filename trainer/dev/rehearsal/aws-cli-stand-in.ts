/**
 * The `aws` command as the box's boot script calls it (trainer/cloud/box/box-boot.sh), for a rehearsal: the
 * same arguments served through the AWS SDK v3 against the endpoints the real CLI v2 reads
 * (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SSM: s3rver and trainer/dev/local-cloud/ssm-endpoint.ts). It knows
 * exactly the calls the script makes and refuses anything else by name, so a new call in the script fails
 * the rehearsal until it is served here:
 *
 *   aws s3 cp [--only-show-errors] [--region R] [--content-type T] SRC DST   (one side s3://bucket/key; `-` is stdin/stdout)
 *   aws ssm get-parameter [--region R] --with-decryption --name N --query Parameter.Value --output text
 *
 * Errors go to stderr with exit 1, as the CLI's do. box-install.ts runs it bundled with its SDK clients
 * (`node aws.mjs …`); `node --import tsx aws-cli-stand-in.ts …` runs it from source.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

const region = () => process.env.AWS_REGION ?? 'us-east-1';

function s3Url(url: string): { Bucket: string; Key: string } | null {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(url);
  return m ? { Bucket: m[1], Key: m[2] } : null;
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function s3Copy(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { 'only-show-errors': { type: 'boolean' }, region: { type: 'string' }, 'content-type': { type: 'string' } },
  });
  if (positionals.length !== 2) throw new Error(`aws s3 cp: expected SRC DST, got ${JSON.stringify(positionals)}`);
  const [src, dst] = positionals;
  const { S3Client, GetObjectCommand, PutObjectCommand } = await import('@aws-sdk/client-s3');
  const client = new S3Client({ region: values.region ?? region(), endpoint: process.env.AWS_ENDPOINT_URL_S3, forcePathStyle: true });
  try {
    const from = s3Url(src);
    const to = s3Url(dst);
    if (from && !to) {
      const res = await client.send(new GetObjectCommand(from));
      const body = Buffer.from(await res.Body!.transformToByteArray());
      if (dst === '-') process.stdout.write(body);
      else await writeFile(dst, body);
    } else if (to && !from) {
      const body = src === '-' ? await readStdin() : await readFile(src);
      await client.send(new PutObjectCommand({ ...to, Body: body, ContentType: values['content-type'] }));
      if (!values['only-show-errors']) process.stdout.write(`upload: ${src} to ${dst}\n`);
    } else {
      throw new Error(`aws s3 cp: exactly one of SRC and DST must be an s3:// URL (${src} ${dst})`);
    }
  } finally {
    client.destroy();
  }
}

async function ssmGetParameter(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { region: { type: 'string' }, 'with-decryption': { type: 'boolean' }, name: { type: 'string' }, query: { type: 'string' }, output: { type: 'string' } },
  });
  if (!values.name) throw new Error('aws ssm get-parameter: --name is required');
  if (values.query !== 'Parameter.Value' || values.output !== 'text') throw new Error('aws ssm get-parameter: only --query Parameter.Value --output text is served');
  const { SSMClient, GetParameterCommand } = await import('@aws-sdk/client-ssm');
  const client = new SSMClient({ region: values.region ?? region(), endpoint: process.env.AWS_ENDPOINT_URL_SSM });
  try {
    const res = await client.send(new GetParameterCommand({ Name: values.name, WithDecryption: values['with-decryption'] === true }));
    process.stdout.write(`${res.Parameter?.Value ?? 'None'}\n`);
  } finally {
    client.destroy();
  }
}

async function main(argv: string[]): Promise<number> {
  const [service, operation, ...rest] = argv;
  try {
    if (service === 's3' && operation === 'cp') await s3Copy(rest);
    else if (service === 'ssm' && operation === 'get-parameter') await ssmGetParameter(rest);
    else throw new Error(`the aws stand-in does not serve \`aws ${argv.slice(0, 2).join(' ')}\` (trainer/dev/rehearsal/aws-cli-stand-in.ts)`);
    return 0;
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`aws ${service} ${operation}: ${e.name}: ${e.message}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
