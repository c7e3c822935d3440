/**
 * Tool-use tasks: a question about the synthetic database (named by its seed) whose answer needs 2-5
 * tool calls in sequence. The reference solution — the calls and the answer — is computed by running
 * the real tools, never supplied, so the oracle's plan and the expected answer cannot disagree.
 */
import { z } from 'zod';
import { Seed } from '../../shared/schemas/index.ts';
import type { SeededRandom } from '../random.ts';
import { generateDatabase, type Database } from './database.ts';
import { McpOptions } from './mcp/options.ts';
import { ANSWER_TOOL, Currency, findTool } from './tools.ts';

const Person = z.string().min(1).max(100).describe('first name of a person in the database');

export const ToolsTask = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('order-cost'), db: Seed, person: Person, currency: Currency }).strict(),
    z.object({ kind: z.literal('last-two-orders-total'), db: Seed, person: Person, currency: Currency }).strict(),
    z.object({ kind: z.literal('days-between-orders'), db: Seed, person: Person }).strict(),
    z.object({ kind: z.literal('date-after-birth'), db: Seed, person: Person, days: z.number().int().min(1).max(20_000) }).strict(),
    z.object({ kind: z.literal('order-weight'), db: Seed, person: Person, unit: z.enum(['lb', 'oz', 'g']) }).strict(),
  ])
  .superRefine((task, ctx) => {
    const names = generateDatabase(task.db).people.map((p) => p.name.split(' ')[0]);
    if (!names.some((n) => n.toLowerCase() === task.person.trim().toLowerCase())) {
      ctx.addIssue({ code: 'custom', path: ['person'], message: `database ${task.db} has no person "${task.person}" (its people: ${names.join(', ')})` });
      return;
    }
    try {
      solveToolsTask(task);
    } catch (err) {
      ctx.addIssue({ code: 'custom', path: ['person'], message: (err as Error).message });
    }
  });
export type ToolsTask = z.infer<typeof ToolsTask>;
export const TASK_KINDS = ToolsTask.options.map((o) => o.shape.kind.value);

export interface PlannedCall {
  tool: string;
  arguments: Record<string, unknown>;
}
export interface ToolsSolution {
  question: string;
  /** The calls that answer the question, in order, ending with `answer`. */
  calls: PlannedCall[];
  answer: string | number;
}

interface OrderView {
  id: string;
  date: string;
  product: string;
  quantity: number;
}
interface PersonView {
  id: string;
  name: string;
  birthDate: string;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

export function solveToolsTask(task: ToolsTask): ToolsSolution {
  const db: Database = generateDatabase(task.db);
  const calls: PlannedCall[] = [];
  const call = <T>(tool: string, args: Record<string, unknown>): T => {
    const outcome = findTool(tool)!.execute(args, db);
    if (!outcome.ok) throw new Error(outcome.error);
    calls.push({ tool, arguments: args });
    return outcome.result as T;
  };
  const person = call<PersonView>('find_person', { name: task.person });
  const first = person.name.split(' ')[0];
  const orders = () => call<{ orders: OrderView[] }>('list_orders', { personId: person.id }).orders;
  const finish = (question: string, answer: string | number): ToolsSolution => {
    calls.push({ tool: ANSWER_TOOL, arguments: { value: answer } });
    return { question, calls, answer };
  };
  switch (task.kind) {
    case 'order-cost': {
      const last = orders().at(-1)!;
      const { unitPrice } = call<{ unitPrice: number }>('get_product', { product: last.product, currency: task.currency });
      const { result } = call<{ result: number }>('calculator', { expression: `${last.quantity} * ${unitPrice}` });
      return finish(`How much did ${first} pay for their most recent order, in ${task.currency}? Answer with the amount, rounded to 2 decimals.`, round2(result));
    }
    case 'last-two-orders-total': {
      const list = orders();
      if (list.length < 2) throw new Error(`${first} has fewer than two orders`);
      const [a, b] = list.slice(-2);
      const price = new Map<string, number>();
      for (const o of [a, b]) {
        if (!price.has(o.product)) price.set(o.product, call<{ unitPrice: number }>('get_product', { product: o.product, currency: task.currency }).unitPrice);
      }
      const { result } = call<{ result: number }>('calculator', { expression: `${a.quantity} * ${price.get(a.product)} + ${b.quantity} * ${price.get(b.product)}` });
      return finish(`What is the total price of ${first}'s last two orders, in ${task.currency}? Answer with the amount, rounded to 2 decimals.`, round2(result));
    }
    case 'days-between-orders': {
      const list = orders();
      if (list.length < 2) throw new Error(`${first} has fewer than two orders`);
      const { days } = call<{ days: number }>('date_diff', { from: list[0].date, to: list.at(-1)!.date });
      return finish(`How many days passed between ${first}'s first order and their most recent order? Answer with a whole number.`, days);
    }
    case 'date-after-birth': {
      const { date } = call<{ date: string }>('date_add', { date: person.birthDate, days: task.days });
      return finish(`What date is ${task.days} days after ${first}'s date of birth? Answer as YYYY-MM-DD.`, date);
    }
    case 'order-weight': {
      const last = orders().at(-1)!;
      const { weightKg } = call<{ weightKg: number }>('get_product', { product: last.product });
      const { result } = call<{ result: number }>('calculator', { expression: `${last.quantity} * ${weightKg}` });
      const { value } = call<{ value: number }>('convert_units', { value: result, from: 'kg', to: task.unit });
      return finish(`How much does ${first}'s most recent order weigh in total, in ${task.unit}? Answer with the number, rounded to 2 decimals.`, round2(value));
    }
  }
}

/** A random task over a random database. */
export function generateToolsTask(random: SeededRandom): ToolsTask {
  const db = random.uint32();
  const person = random.pick(generateDatabase(db).people).name.split(' ')[0];
  const kind = random.pick(TASK_KINDS);
  const currency = random.pick(Currency.options);
  switch (kind) {
    case 'order-cost':
    case 'last-two-orders-total':
      return { kind, db, person, currency };
    case 'days-between-orders':
      return { kind, db, person };
    case 'date-after-birth':
      return { kind, db, person, days: random.range(100, 20_000) };
    case 'order-weight':
      return { kind, db, person, unit: random.pick(['lb', 'oz', 'g'] as const) };
  }
}

export const ToolsOptions = z
  .object({
    /** Steps beyond the reference solution's calls; the horizon is calls + slack unless `horizon` is set. */
    slack: z.number().int().min(0).max(100).default(3),
    horizon: z.number().int().min(1).max(1000).optional(),
    /**
     * Offer the tools in the chat API's `tools` form (the model's chat template renders them; replies come
     * back as `tool_calls`, results go back as `tool` messages), as a tool-use agent is served. Off: the
     * system prompt describes a JSON reply format and no `tools` are sent.
     */
    toolCalls: z.boolean().default(false),
    /**
     * Tools served by MCP servers instead of the synthetic database's (mcp/options.ts): tasks are then
     * `{kind: "mcp", question, verifier}`, and the horizon is `horizon` (default 10; `slack` has no reference to add to).
     */
    mcp: McpOptions.optional(),
  })
  .strict();
export type ToolsOptions = z.infer<typeof ToolsOptions>;
