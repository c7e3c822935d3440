/**
 * A loopback endpoint that answers the AWS SDK v3 clients with recorded responses (test/fixtures/aws-doctor/):
 * each request is routed by its action — the query protocol's `Action=` (EC2, STS), JSON 1.1's X-Amz-Target
 * (Service Quotas, with the quota code), Lambda's REST path — to a recording, or answers 400 naming the
 * unrecorded action, so a call the doctor was not meant to make fails the test that sees it.
 */
import { createServer, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';

export interface Recording {
  status?: number;
  /** File under test/fixtures/aws-doctor/. */
  file: string;
}

const FIXTURES = new URL('../../fixtures/aws-doctor/', import.meta.url);

export interface RecordedAws {
  url: string;
  /** Actions asked, in order. */
  asked: string[];
  /** Each request's body, in the same order (the query protocol's form: `InstanceId.1=…`). */
  bodies: string[];
  close(): Promise<void>;
}

/** `recordings` keys: `ec2:DescribeVpcs`, `sts:GetCallerIdentity`, `quotas:ec2/L-DB2E81BA`, `lambda:GetAccountSettings`. */
export async function recordedAws(recordings: Record<string, Recording>): Promise<RecordedAws> {
  const asked: string[] = [];
  const bodies: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      let key: string;
      const target = req.headers['x-amz-target'];
      if (req.method === 'GET' && req.url?.startsWith('/2016-08-19/account-settings')) key = 'lambda:GetAccountSettings';
      else if (typeof target === 'string' && target.startsWith('ServiceQuotasV20190624.')) {
        const input = JSON.parse(body) as { ServiceCode: string; QuotaCode: string };
        key = `quotas:${input.ServiceCode}/${input.QuotaCode}`;
      } else {
        const form = new URLSearchParams(body);
        key = `${form.get('Version') === '2011-06-15' ? 'sts' : 'ec2'}:${form.get('Action')}`;
      }
      asked.push(key);
      bodies.push(body);
      const r = recordings[key];
      if (!r) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`no recording for ${key}`);
        return;
      }
      const file = r.file;
      const type = file.endsWith('.xml') ? 'text/xml;charset=UTF-8' : key.startsWith('quotas:') ? 'application/x-amz-json-1.1' : 'application/json';
      res.writeHead(r.status ?? 200, { 'content-type': type, 'x-amzn-requestid': 'recorded' }).end(readFileSync(new URL(file, FIXTURES)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked,
    bodies,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
