#!/usr/bin/env node
// The npm registry this project is built against serves only sst's linux-x64 binary package, so
// `npm install` records sst's other platform packages as optional edges with no entry, and `npm ci`
// then refuses the lock ("Missing: sst-darwin-arm64 from lock file"). This drops optional edges that
// have no package entry. Run it after any `npm install` that rewrites package-lock.json.
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const packages = lock.packages;
const dropped = [];
for (const [name, entry] of Object.entries(packages)) {
  const optional = entry.optionalDependencies;
  if (!optional) continue;
  for (const dep of Object.keys(optional)) {
    const nested = name ? `${name}/node_modules/${dep}` : `node_modules/${dep}`;
    if (!(nested in packages) && !(`node_modules/${dep}` in packages)) {
      delete optional[dep];
      dropped.push(`${name || '(root)'} → ${dep}`);
    }
  }
  if (Object.keys(optional).length === 0) delete entry.optionalDependencies;
}
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(dropped.length ? `dropped ${dropped.length} optional edges without a package:\n  ${dropped.join('\n  ')}` : 'nothing to drop');
