/**
 * The tools of the tool-use environment, each with a zod input schema. `execute` validates the raw
 * arguments and runs the tool; every failure (bad arguments, a lookup that finds nothing, a calculator
 * syntax error) comes back as a message for an error observation, never as an exception.
 */
import { z } from 'zod';
import type { ToolSpec } from '../../shared/ports/policy.ts';
import { evaluate } from './calculator.ts';
import type { Database } from './database.ts';
import { addDays, daysBetween } from './dates.ts';
import { convertUnits, UNIT_NAMES } from './units.ts';

/** Fixed exchange rates of the synthetic world: units of the currency per 1 USD. */
export const CURRENCY_RATES = { USD: 1, EUR: 0.9, GBP: 0.8, JPY: 150 } as const;
export const Currency = z.enum(['USD', 'EUR', 'GBP', 'JPY']);
export type Currency = z.infer<typeof Currency>;

/** A catalogue price in a currency, quoted in whole cents (so it is exact and reproducible). */
export function priceIn(priceCentsUsd: number, currency: Currency): number {
  return Math.round(priceCentsUsd * CURRENCY_RATES[currency]) / 100;
}

const CalendarDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date YYYY-MM-DD');

export type ToolOutcome = { ok: true; result: unknown } | { ok: false; error: string };

export interface Tool {
  name: string;
  description: string;
  spec: ToolSpec;
  execute(args: unknown, db: Database): ToolOutcome;
}

function defineTool<S extends z.ZodType>(name: string, description: string, input: S, run: (args: z.infer<S>, db: Database) => unknown): Tool {
  return {
    name,
    description,
    spec: { name, description, parameters: z.toJSONSchema(input, { io: 'input' }) as Record<string, unknown> },
    execute(args, db) {
      const parsed = input.safeParse(args);
      if (!parsed.success) return { ok: false, error: `invalid arguments for ${name}:\n${z.prettifyError(parsed.error)}` };
      try {
        return { ok: true, result: run(parsed.data, db) };
      } catch (err) {
        return { ok: false, error: `${name} failed: ${(err as Error).message}` };
      }
    },
  };
}

export const ANSWER_TOOL = 'answer';
export const AnswerArguments = z.object({ value: z.union([z.string().min(1).max(200), z.number().finite()]) }).strict();

export const TOOLS: readonly Tool[] = [
  defineTool('find_person', 'Look a person up by name (full name or first name).', z.object({ name: z.string().min(1).max(100) }).strict(), ({ name }, db) => {
    const q = name.trim().toLowerCase();
    const hits = db.people.filter((p) => p.name.toLowerCase() === q || p.name.split(' ')[0].toLowerCase() === q);
    if (hits.length === 0) throw new Error(`no person named "${name}"`);
    if (hits.length > 1) throw new Error(`"${name}" matches ${hits.length} people: ${hits.map((p) => p.name).join(', ')}`);
    return hits[0];
  }),
  defineTool('list_orders', "A person's orders, oldest first.", z.object({ personId: z.string().min(1).max(20) }).strict(), ({ personId }, db) => {
    if (!db.people.some((p) => p.id === personId)) throw new Error(`no person with id "${personId}" (ids look like P1)`);
    return { orders: db.orders.filter((o) => o.personId === personId).map(({ id, date, product, quantity }) => ({ id, date, product, quantity })) };
  }),
  defineTool(
    'get_product',
    'A product from the catalogue: its unit price in a currency (USD unless given) and its weight in kg.',
    z.object({ product: z.string().min(1).max(100), currency: Currency.default('USD') }).strict(),
    ({ product, currency }, db) => {
      const p = db.products.find((x) => x.name === product.trim().toLowerCase());
      if (!p) throw new Error(`no product "${product}" (products: ${db.products.map((x) => x.name).join(', ')})`);
      return { product: p.name, unitPrice: priceIn(p.priceCentsUsd, currency), currency, weightKg: p.weightKg };
    },
  ),
  defineTool('calculator', 'Evaluate an arithmetic expression: + - * / % ^, parentheses, round(x, digits), min, max, abs, sqrt, floor, ceil.', z.object({ expression: z.string().min(1).max(500) }).strict(), ({ expression }) => ({
    result: evaluate(expression),
  })),
  defineTool(
    'convert_units',
    `Convert a value between units of length, mass, volume or temperature (${UNIT_NAMES.join(', ')}).`,
    z.object({ value: z.number().finite(), from: z.string().min(1).max(20), to: z.string().min(1).max(20) }).strict(),
    ({ value, from, to }) => ({ value: convertUnits(value, from, to), unit: to }),
  ),
  defineTool('date_add', 'The date a number of days after (or, if negative, before) a date.', z.object({ date: CalendarDate, days: z.number().int().min(-100_000).max(100_000) }).strict(), ({ date, days }) => ({
    date: addDays(date, days),
  })),
  defineTool('date_diff', 'Whole days from one date to another (negative if "to" is earlier).', z.object({ from: CalendarDate, to: CalendarDate }).strict(), ({ from, to }) => ({
    days: daysBetween(from, to),
  })),
  defineTool(ANSWER_TOOL, 'Give the final answer and end the episode.', AnswerArguments, ({ value }) => ({ value })),
];

export function findTool(name: string): Tool | undefined {
  return TOOLS.find((t) => t.name === name);
}
