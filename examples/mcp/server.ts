/**
 * An example MCP server on @modelcontextprotocol/sdk: a small bookshop whose tools an agent uses to answer
 * questions, plus a verifier tool that grades an answer (never offered to the model when a task names it).
 *
 *   npx tsx examples/mcp/server.ts --port 8000     streamable HTTP on 127.0.0.1:8000/mcp (prints the port)
 *   npx tsx examples/mcp/server.ts --stdio         MCP over stdin/stdout, as a run's `command`
 *
 * Stateless: each HTTP request gets a fresh server and transport, so concurrent episodes share nothing.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export const BOOKS = [
  { id: 'b1', title: 'The Left Hand of Darkness', author: 'Ursula K. Le Guin', year: 1969, priceCents: 1299, stock: 4 },
  { id: 'b2', title: 'A Wizard of Earthsea', author: 'Ursula K. Le Guin', year: 1968, priceCents: 999, stock: 0 },
  { id: 'b3', title: 'Kindred', author: 'Octavia E. Butler', year: 1979, priceCents: 1550, stock: 7 },
  { id: 'b4', title: 'Parable of the Sower', author: 'Octavia E. Butler', year: 1993, priceCents: 1425, stock: 2 },
  { id: 'b5', title: 'Solaris', author: 'Stanisław Lem', year: 1961, priceCents: 1100, stock: 5 },
  { id: 'b6', title: 'Roadside Picnic', author: 'Arkady and Boris Strugatsky', year: 1972, priceCents: 1050, stock: 3 },
] as const;

const text = (value: unknown) => ({ content: [{ type: 'text' as const, text: JSON.stringify(value) }] });

export function createBookshopServer(): McpServer {
  const server = new McpServer({ name: 'bookshop', version: '1.0.0' });
  server.registerTool(
    'search_books',
    { description: 'Books whose title or author contains the query (case-insensitive): id, title, author, year.', inputSchema: { query: z.string().min(1).max(100) } },
    async ({ query }) => {
      const q = query.toLowerCase();
      return text(BOOKS.filter((b) => b.title.toLowerCase().includes(q) || b.author.toLowerCase().includes(q)).map(({ id, title, author, year }) => ({ id, title, author, year })));
    },
  );
  server.registerTool('get_book', { description: 'One book by id: its price in US cents and how many are in stock.', inputSchema: { id: z.string().min(1).max(10) } }, async ({ id }) => {
    const book = BOOKS.find((b) => b.id === id);
    if (!book) return { content: [{ type: 'text', text: `no book with id ${id} (ids look like b1)` }], isError: true };
    return text(book);
  });
  server.registerTool(
    'grade',
    {
      description: 'Verifier: reward 1 when the answer equals the expected value (numbers within 0.01), else 0.',
      inputSchema: { answer: z.unknown(), expected: z.union([z.string(), z.number()]) },
      outputSchema: { reward: z.number() },
    },
    async ({ answer, expected }) => {
      const right = typeof expected === 'number' ? Math.abs(Number(answer) - expected) <= 0.01 : String(answer).trim().toLowerCase() === expected.trim().toLowerCase();
      const result = { reward: right ? 1 : 0 };
      return { ...text(result), structuredContent: result };
    },
  );
  return server;
}

/** Streamable HTTP at /mcp on 127.0.0.1:`port` (0: any free port), one fresh server per request. */
export function serveBookshopHttp(port: number, make: () => McpServer = createBookshopServer): Promise<Server> {
  const http = createServer((req, res) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') return void res.writeHead(404).end();
    if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const server = make();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        if (!res.headersSent) res.writeHead(400).end();
      }
    });
  });
  return new Promise((resolve) => http.listen(port, '127.0.0.1', () => resolve(http)));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes('--stdio')) {
    await createBookshopServer().connect(new StdioServerTransport());
  } else {
    const at = process.argv.indexOf('--port');
    const http = await serveBookshopHttp(at >= 0 ? Number(process.argv[at + 1]) : 8000);
    console.log((http.address() as AddressInfo).port);
  }
}
