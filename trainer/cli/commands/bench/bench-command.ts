import type { z } from 'zod';
import { parseFlags, type FlagSpec } from '../../argv/args.ts';
import type { Command } from '../../argv/command.ts';
import { optionsFromFlags } from '../../argv/flag-options.ts';
import type { Benchmark } from '../../../studies/bench/benchmark.ts';

export interface BenchCommandSpec<B extends Benchmark> {
  name: string;
  usage: string;
  flags: FlagSpec;
  /** Flags whose option is not the flag's name in camelCase. */
  rename?: Record<string, string>;
  load: () => Promise<B>;
  /** The result for a person (without --json). */
  text: (result: Awaited<ReturnType<B['run']>>) => string;
  /** --json output indented (the benchmarks that always printed it so). */
  indent?: boolean;
  /** The exit code a result stands for (default 0). */
  exitCode?: (result: Awaited<ReturnType<B['run']>>) => number;
}

/** A benchmark's CLI command: flags → the module's options, progress on stderr, the result as text or --json. */
export function benchCommand<B extends Benchmark<z.ZodType, unknown>>(spec: BenchCommandSpec<B>): Command {
  return {
    name: spec.name,
    usage: spec.usage,
    async run(argv, io) {
      const p = parseFlags(argv, spec.flags);
      const bench = await spec.load();
      const options = optionsFromFlags(bench.options, p.values, Object.keys(spec.flags), spec.rename);
      const result = (await bench.run(options, (m) => (p.json ? undefined : io.stderr(m)))) as Awaited<ReturnType<B['run']>>;
      io.stdout(p.json ? JSON.stringify(result, null, spec.indent ? 2 : undefined) : spec.text(result));
      return spec.exitCode?.(result) ?? 0;
    },
  };
}
