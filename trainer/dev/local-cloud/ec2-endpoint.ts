/**
 * An EC2-compatible endpoint on loopback for the one thing the stack asks of EC2 at run time: starting and
 * stopping the trainer box (the query protocol `@aws-sdk/client-ec2` speaks: a form POST with `Action=` and
 * `InstanceId.N=`, answered in EC2's XML). It holds each instance's state; a start or stop answers with the
 * state before and the transitional one (`pending`, `stopping`), which becomes `running` / `stopped`
 * `settleMs` later, as on EC2 a while later. What AWS refuses it refuses: an unknown id
 * (InvalidInstanceID.NotFound), starting a stopping instance (IncorrectInstanceState), any other action.
 * `requests` lists each call, for the rehearsal and the tests to check.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type InstanceState = 'pending' | 'running' | 'stopping' | 'stopped';

export interface Ec2Endpoint {
  url: string;
  requests: { action: string; instanceIds: string[] }[];
  state(id: string): InstanceState | undefined;
  close(): Promise<void>;
}

const CODES: Record<InstanceState, number> = { pending: 0, running: 16, stopping: 64, stopped: 80 };
const SETTLED: Record<InstanceState, InstanceState> = { pending: 'running', running: 'running', stopping: 'stopped', stopped: 'stopped' };

const state = (tag: string, s: InstanceState) => `<${tag}><code>${CODES[s]}</code><name>${s}</name></${tag}>`;
const error = (code: string, message: string) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${code}</Code><Message>${message}</Message></Error></Errors><RequestID>esopt-dev</RequestID></Response>`;

/** `instances`: the ids this endpoint knows, with their state now. */
export async function startEc2Endpoint(instances: Record<string, InstanceState>, settleMs = 50): Promise<Ec2Endpoint> {
  const states = new Map(Object.entries(instances));
  const requests: Ec2Endpoint['requests'] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const action = form.get('Action') ?? '';
      const ids = [...form.entries()].filter(([k]) => /^InstanceId\.\d+$/.test(k)).map(([, v]) => v);
      requests.push({ action, instanceIds: ids });
      const xml = (status: number, text: string) => res.writeHead(status, { 'content-type': 'text/xml;charset=UTF-8' }).end(text);
      if (action !== 'StartInstances' && action !== 'StopInstances') return xml(400, error('InvalidAction', `${action} is not served by the dev EC2 endpoint`));
      const unknown = ids.filter((id) => !states.has(id));
      if (!ids.length || unknown.length) return xml(400, error('InvalidInstanceID.NotFound', `The instance ID '${unknown.join(', ')}' does not exist`));
      const start = action === 'StartInstances';
      if (start && ids.some((id) => states.get(id) === 'stopping')) return xml(400, error('IncorrectInstanceState', `The instance '${ids[0]}' is not in a state from which it can be started.`));
      const items = ids.map((id) => {
        const before = states.get(id)!;
        const after: InstanceState = start ? (before === 'stopped' ? 'pending' : before) : before === 'running' || before === 'pending' ? 'stopping' : before;
        states.set(id, after);
        setTimeout(() => states.get(id) === after && states.set(id, SETTLED[after]), settleMs).unref();
        return `<item><instanceId>${id}</instanceId>${state('currentState', after)}${state('previousState', before)}</item>`;
      });
      const tag = `${action}Response`;
      xml(200, `<?xml version="1.0" encoding="UTF-8"?>\n<${tag} xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>esopt-dev</requestId><instancesSet>${items.join('')}</instancesSet></${tag}>`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    state: (id) => states.get(id),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
