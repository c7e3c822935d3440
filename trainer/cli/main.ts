import { text } from 'node:stream/consumers';
import type { CommandIo } from './argv/command.ts';
import { registry } from './registry.ts';
import { UsageError } from './argv/usage-error.ts';

const defaultIo: CommandIo = {
  stdout: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
  stderr: (t) => process.stderr.write(t.endsWith('\n') ? t : `${t}\n`),
  readStdin: () => text(process.stdin),
};

function help(): string {
  const width = Math.max(...registry.map((e) => e.name.length));
  return [
    'esopt — fine-tune LLM agents with evolution strategies',
    '',
    'Usage: esopt <command> [flags]   (every command takes --json and --help)',
    '',
    'Commands:',
    ...registry.map((e) => `  ${e.name.padEnd(width)}  ${e.summary}`),
  ].join('\n');
}

/** Runs one CLI invocation; resolves to the exit code (2 for bad usage, 1 for failures). */
export async function main(argv: string[], io: CommandIo = defaultIo): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    io.stdout(help());
    return argv.length === 0 ? 2 : 0;
  }
  // Longest command name that prefixes the arguments wins ("bench noise" before "bench").
  const entry = [...registry]
    .sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)
    .find((e) => e.name.split(' ').every((w, i) => argv[i] === w));
  if (!entry) {
    io.stderr(`esopt: unknown command "${argv.filter((a) => !a.startsWith('-')).slice(0, 2).join(' ')}"\n\n${help()}`);
    return 2;
  }
  const command = await entry.load();
  const rest = argv.slice(entry.name.split(' ').length);
  try {
    if (rest.includes('--help') || rest.includes('-h')) {
      io.stdout(`${command.usage}\n\n${entry.summary}`);
      return 0;
    }
    return await command.run(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`esopt ${entry.name}: ${err.message}\n\nUsage: ${command.usage}`);
      return 2;
    }
    io.stderr(`esopt ${entry.name}: ${(err as Error).message}`);
    return 1;
  }
}
