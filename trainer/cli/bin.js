#!/usr/bin/env node
// The `esopt` binary: TypeScript sources run through tsx, so there is no build step to forget.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2));
