/** What every CLI command module exports. */
export interface CommandIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  readStdin: () => Promise<string>;
}

export interface Command {
  /** One or more words: `noise`, `es step`, `bench noise`. */
  name: string;
  summary: string;
  usage: string;
  /** Resolves to the exit code. Throw UsageError for bad usage (exit 2). */
  run(argv: string[], io: CommandIo): Promise<number>;
}
