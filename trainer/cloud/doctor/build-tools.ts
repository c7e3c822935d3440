/**
 * The toolchain the deploy rehearsal's Lambda runtime client (aws-lambda-ric 3.3.0) compiles with on its first
 * use (trainer/dev/rehearsal/runtime-client.ts installs it; `esopt cloud doctor` checks it here): curl and
 * aws-lambda-cpp from source, then node-gyp. Here rather than beside the installer so the preflight, a room
 * below the rehearsal's, can check the same list.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** What its install runs: each Debian package and the commands it puts on PATH (any one of them will do). */
export const RIC_BUILD_TOOLS: ReadonlyArray<{ package: string; commands: readonly string[] }> = [
  { package: 'autoconf', commands: ['autoconf'] },
  { package: 'automake', commands: ['automake'] },
  { package: 'libtool', commands: ['libtoolize'] },
  { package: 'cmake', commands: ['cmake', 'cmake3'] },
  { package: 'make', commands: ['make'] },
  { package: 'g++', commands: ['g++'] },
  { package: 'python3', commands: ['python3'] },
];
/** The Debian command that installs them all. */
export const RIC_APT_COMMAND = `apt-get install ${RIC_BUILD_TOOLS.map((t) => t.package).join(' ')}`;

function onPath(command: string, path: string): boolean {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    try {
      const file = join(dir, command);
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return true;
    } catch {
      // not here
    }
  }
  return false;
}

/** The build tools missing from `path` (the first command each package would put there); empty when all are there. */
export function missingBuildTools(path: string = process.env.PATH ?? ''): Array<{ package: string; command: string }> {
  return RIC_BUILD_TOOLS.filter((t) => !t.commands.some((c) => onPath(c, path))).map((t) => ({ package: t.package, command: t.commands[0]! }));
}
