/**
 * The synthetic database the lookup tools read: people, their orders and a product catalogue with
 * prices, all a pure function of one seed, so a task only needs to carry the seed.
 */
import { SeededRandom } from '../random.ts';
import { formatDate } from './dates.ts';

export interface Person {
  id: string;
  name: string;
  city: string;
  birthDate: string;
}
export interface Order {
  id: string;
  personId: string;
  date: string;
  product: string;
  quantity: number;
}
export interface Product {
  name: string;
  /** Integer cents, so prices are exact. */
  priceCentsUsd: number;
  weightKg: number;
}
export interface Database {
  people: Person[];
  orders: Order[];
  products: Product[];
}

const FIRST = ['Alice', 'Bruno', 'Chiara', 'Dmitri', 'Elena', 'Farid', 'Grace', 'Hiro', 'Ines', 'Jonas', 'Kemal', 'Lena', 'Mateo', 'Nadia', 'Oskar', 'Priya'];
const LAST = ['Moreno', 'Schmidt', 'Okafor', 'Lindqvist', 'Tanaka', 'Rossi', 'Novak', 'Haddad', 'Kowalski', 'Silva', 'Dubois', 'Murphy'];
const CITIES = ['Lisbon', 'Berlin', 'Lagos', 'Oslo', 'Osaka', 'Turin', 'Prague', 'Beirut', 'Krakow', 'Recife', 'Lyon', 'Cork'];
const PRODUCTS = ['lamp', 'kettle', 'backpack', 'headphones', 'teapot', 'blender', 'umbrella', 'notebook', 'chair', 'toaster', 'skillet', 'monitor'];

export const PEOPLE_PER_DATABASE = 8;
export const PRODUCTS_PER_DATABASE = 8;

export function generateDatabase(seed: number): Database {
  const random = new SeededRandom(seed, 0xdb);
  const products = random
    .shuffle(PRODUCTS.slice())
    .slice(0, PRODUCTS_PER_DATABASE)
    .map((name) => ({ name, priceCentsUsd: random.range(199, 19_999), weightKg: random.range(1, 150) / 10 }));
  const firstNames = random.shuffle(FIRST.slice()).slice(0, PEOPLE_PER_DATABASE);
  const people: Person[] = firstNames.map((first, k) => ({
    id: `P${k + 1}`,
    name: `${first} ${random.pick(LAST)}`,
    city: random.pick(CITIES),
    birthDate: formatDate(Date.UTC(random.range(1950, 2004), random.int(12), random.range(1, 28))),
  }));
  const orders: Order[] = [];
  const start = Date.UTC(2023, 0, 1);
  for (const person of people) {
    const count = random.range(2, 5);
    const days = new Set<number>();
    while (days.size < count) days.add(random.int(3 * 365));
    for (const day of [...days].sort((a, b) => a - b)) {
      orders.push({ id: `O${100 + orders.length + 1}`, personId: person.id, date: formatDate(start + day * 86_400_000), product: random.pick(products).name, quantity: random.range(1, 5) });
    }
  }
  return { people, orders, products };
}
