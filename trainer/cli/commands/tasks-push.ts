import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { pushSuite } from '../../../environments/task-suites/push-suite.ts';
import { pushTaskFolder } from '../../../environments/web/task-folder-catalog.ts';
import { TASK_FOLDER_LIMITS, TASK_SUITE_LIMITS, TaskSuiteName } from '../../../shared/schemas/index.ts';
import type { CommandIo } from '../argv/command.ts';
import type { Parsed } from '../argv/args.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'tasks push',
  usage:
    'esopt tasks push FILE.jsonl --name NAME --environment ENV [--store DIR | --cloud] [--json]\n' +
    'esopt tasks push DIR --name NAME [--environment web] [--store DIR | --cloud] [--json]\n' +
    `  FILE.jsonl: one task a line, each valid for ENV's task schema, each once (≤ ${TASK_SUITE_LIMITS.fileBytes} bytes, ≤ ${TASK_SUITE_LIMITS.lineBytes} a line)\n` +
    `  DIR: a MiniWoB++-layout folder (html/miniwob/<task>.html beside what its pages load; ≤ ${TASK_FOLDER_LIMITS.files} files), named by web options as miniwob.folder`,
  async run(argv, io) {
    const p = parseFlags(argv, { ...storeFlags, name: { type: 'string' }, environment: { type: 'string' } }, true);
    if (p.positionals.length !== 1) throw new UsageError('give exactly one JSONL file');
    const file = p.positionals[0];
    const name = flag(p.values, 'name', TaskSuiteName);
    if (statSync(file, { throwIfNoEntry: false })?.isDirectory()) return pushFolder(p, file, name, io);
    const environment = flag(p.values, 'environment', z.string().min(1));
    let text: string;
    try {
      if (statSync(file).size > TASK_SUITE_LIMITS.fileBytes) throw new Error(`${file} is over ${TASK_SUITE_LIMITS.fileBytes} bytes, the most a task suite holds`);
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const chosen = storeFromFlags(p);
    try {
      let result;
      try {
        result = await pushSuite(chosen.store, { name, environment, text });
      } catch (err) {
        throw new UsageError(`${file}: ${(err as Error).message}`);
      }
      const r = result.record;
      if (p.json) io.stdout(JSON.stringify({ ...r, stored: result.stored, store: chosen.where }));
      else {
        io.stdout(
          [
            `pushed task suite ${r.name} (${r.environment}) to ${chosen.where}: ${r.tasks} tasks — train ${r.splits.train}, eval ${r.splits.eval}, validation ${r.splits.validation}${result.stored ? '' : ' (these exact tasks were stored already)'}`,
            `manifest ${r.manifestSha256}`,
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};

/** A folder of task pages: its files by content, a manifest, the name last (web/task-folder-catalog.ts). */
async function pushFolder(p: Parsed, dir: string, name: string, io: CommandIo): Promise<number> {
  // Checked only: a folder of task pages is the web environment's, so the flag may be left out.
  flag(p.values, 'environment', z.literal('web', { message: 'a folder of task pages is for the web environment' }).optional());
  const chosen = storeFromFlags(p);
  try {
    let result;
    let shown = 0;
    try {
      result = await pushTaskFolder(chosen.store, name, dir, new Date(), (done, of) => {
        // A line every tenth of the way on a terminal; --json keeps stderr quiet but for errors.
        if (!p.json && (done === of || done - shown >= Math.max(1, Math.ceil(of / 10)))) {
          shown = done;
          io.stderr(`  ${done}/${of} files`);
        }
      });
    } catch (err) {
      throw new UsageError(`${dir}: ${(err as Error).message}`);
    }
    const r = result.record;
    if (p.json) io.stdout(JSON.stringify({ ...r, storedFiles: result.storedFiles, store: chosen.where }));
    else io.stdout([`pushed task folder ${r.name} to ${chosen.where}: ${r.tasks} task pages, ${r.files} files (${result.storedFiles} new), ${r.bytes} bytes`, `manifest ${r.manifestSha256}`].join('\n'));
    return 0;
  } finally {
    chosen.close();
  }
}
