/** What every CLI command module exports, and how a list names one without loading it. */
export interface CommandIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  readStdin: () => Promise<string>;
}

export interface Command {
  /** One or more words: `noise`, `es step`, `bench noise`. */
  name: string;
  usage: string;
  /** Resolves to the exit code. Throw UsageError for bad usage (exit 2). */
  run(argv: string[], io: CommandIo): Promise<number>;
}

/** A command as a list holds it: its summary is said here once, and its module loads only when it runs. */
export interface CommandEntry {
  name: string;
  summary: string;
  load: () => Promise<Command>;
}
