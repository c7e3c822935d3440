/** A function-URL event (payload 2.0), as Lambda hands it to a handler: the fields the Api tests vary, the rest fixed. */
export function functionUrlEvent(method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { host: 'abc.lambda-url.us-east-1.on.aws', 'user-agent': 'vitest', ...headers },
    requestContext: {
      accountId: 'anonymous',
      apiId: 'abc',
      domainName: 'abc.lambda-url.us-east-1.on.aws',
      domainPrefix: 'abc',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'vitest' },
      requestId: 'r1',
      routeKey: '$default',
      stage: '$default',
      time: '02/Dec/2026:15:00:00 +0000',
      timeEpoch: 1796223600000,
    },
    ...(body !== undefined ? { body } : {}),
    isBase64Encoded: false,
  };
}
