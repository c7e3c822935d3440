/**
 * The unit converter: length, mass, volume and temperature. Linear units are a factor to the
 * dimension's base unit; temperature is affine, so it converts through kelvin.
 */
type Dimension = 'length' | 'mass' | 'volume' | 'temperature';

interface Unit {
  dimension: Dimension;
  /** value in the base unit = value · factor + offset */
  factor: number;
  offset: number;
}

const linear = (dimension: Dimension, factor: number): Unit => ({ dimension, factor, offset: 0 });

const UNITS: Record<string, Unit> = {
  m: linear('length', 1),
  km: linear('length', 1000),
  cm: linear('length', 0.01),
  mm: linear('length', 0.001),
  mi: linear('length', 1609.344),
  yd: linear('length', 0.9144),
  ft: linear('length', 0.3048),
  in: linear('length', 0.0254),
  kg: linear('mass', 1),
  g: linear('mass', 0.001),
  lb: linear('mass', 0.45359237),
  oz: linear('mass', 0.028349523125),
  l: linear('volume', 1),
  ml: linear('volume', 0.001),
  gal: linear('volume', 3.785411784),
  c: { dimension: 'temperature', factor: 1, offset: 273.15 },
  f: { dimension: 'temperature', factor: 5 / 9, offset: 273.15 - (32 * 5) / 9 },
  k: linear('temperature', 1),
};

const ALIASES: Record<string, string> = {
  meter: 'm', meters: 'm', metre: 'm', metres: 'm', kilometer: 'km', kilometers: 'km', kilometre: 'km', kilometres: 'km',
  centimeter: 'cm', centimeters: 'cm', millimeter: 'mm', millimeters: 'mm', mile: 'mi', miles: 'mi', yard: 'yd', yards: 'yd',
  foot: 'ft', feet: 'ft', inch: 'in', inches: 'in', kilogram: 'kg', kilograms: 'kg', kgs: 'kg', gram: 'g', grams: 'g',
  pound: 'lb', pounds: 'lb', lbs: 'lb', ounce: 'oz', ounces: 'oz', liter: 'l', liters: 'l', litre: 'l', litres: 'l',
  milliliter: 'ml', milliliters: 'ml', gallon: 'gal', gallons: 'gal', celsius: 'c', '°c': 'c', fahrenheit: 'f', '°f': 'f', kelvin: 'k',
};

export const UNIT_NAMES = Object.keys(UNITS);

function unit(name: string): Unit {
  const key = name.trim().toLowerCase();
  const u = UNITS[ALIASES[key] ?? key];
  if (!u) throw new Error(`unknown unit "${name}" (known: ${UNIT_NAMES.join(', ')})`);
  return u;
}

export function convertUnits(value: number, from: string, to: string): number {
  const a = unit(from);
  const b = unit(to);
  if (a.dimension !== b.dimension) throw new Error(`cannot convert ${a.dimension} (${from}) to ${b.dimension} (${to})`);
  return (value * a.factor + a.offset - b.offset) / b.factor;
}
