/** Words the task generators draw labels, names and values from. */
export const WORDS = [
  'apple', 'river', 'orbit', 'maple', 'cobalt', 'ember', 'falcon', 'garnet', 'harbor', 'iris', 'jasper', 'kettle', 'lantern', 'meadow',
  'nectar', 'onyx', 'pepper', 'quartz', 'raven', 'saffron', 'timber', 'umber', 'velvet', 'willow', 'yonder', 'zephyr', 'bramble', 'cinder',
  'dune', 'fjord', 'glacier', 'heron', 'indigo', 'juniper', 'lagoon', 'mosaic', 'nimbus', 'opal', 'pebble', 'quill', 'sable', 'tundra',
] as const;

export const FIRST_NAMES = ['Ada', 'Boris', 'Chen', 'Dara', 'Elif', 'Femi', 'Greta', 'Hiro', 'Ines', 'Jonas', 'Kira', 'Luis', 'Mina', 'Nils', 'Omar', 'Priya'] as const;
export const LAST_NAMES = ['Abe', 'Berg', 'Costa', 'Diaz', 'Eze', 'Fischer', 'Gupta', 'Hansen', 'Ivanova', 'Jensen', 'Kowalski', 'Lopez', 'Moreau', 'Novak'] as const;
export const COUNTRIES = ['Argentina', 'Brazil', 'Canada', 'Denmark', 'Egypt', 'Finland', 'Ghana', 'India', 'Japan', 'Kenya', 'Mexico', 'Norway', 'Peru'] as const;
export const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'] as const;

/** `count` distinct entries of `list`, in random order. */
export function distinct<T>(random: { shuffle<U>(items: U[]): U[] }, list: readonly T[], count: number): T[] {
  return random.shuffle([...list]).slice(0, count);
}
