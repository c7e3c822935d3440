#!/usr/bin/env bash
# Packs what scripts/device-gpu-check.sh needs on a GPU machine that has no Node and no network into
# .gpu-bundle/ at the repository root (ignored through .git/info/exclude; it travels as a carried path):
#   node.xz           this machine's Node binary (a standalone build), xz-compressed
#   modules.tar.xz    the npm packages the CLI imports (found by bundling trainer/cli/main.ts with esbuild
#                     and reading its metafile), tsx and esbuild to run the TypeScript sources as they are,
#                     and onnxruntime-node with its Linux x64 binaries only (its WebGPU provider is bundled)
#   gl/*.deb          Debian's Vulkan loader and GL dispatch libraries (the device's driver brings the ICD)
# The sources themselves are not bundled: the repository's checkout travels, and tsx runs it there as here,
# worker threads and child processes included (they load .ts entries relative to their own files).
# Usage: scripts/device-bundle.sh   (prints the bundle's size beside the checkout's tracked files)
set -euo pipefail
cd "$(dirname "$0")/.."
B=.gpu-bundle
fail() { echo "device-bundle: FAIL: $*" >&2; exit 1; }

EXCLUDE=$(git rev-parse --git-path info/exclude)
grep -qx '/.gpu-bundle/' "$EXCLUDE" 2>/dev/null || echo '/.gpu-bundle/' >> "$EXCLUDE"
mkdir -p "$B/gl"
[ "$(uname -m)" = x86_64 ] || fail "the device is x86-64; build the bundle on an x86-64 machine"

NODE=$(command -v node) || fail "no node on the PATH"
NODE=$(readlink -f "$NODE")
if ldd "$NODE" 2>&1 | grep -qE 'libnode|not found'; then fail "$NODE links a shared libnode: bring a standalone Node build"; fi
if [ ! -s "$B/node.xz" ] || [ "$NODE" -nt "$B/node.xz" ]; then
  echo "device-bundle: compressing $NODE ($("$NODE" --version))" >&2
  xz -T0 -6 -c "$NODE" > "$B/node.xz.partial" && mv "$B/node.xz.partial" "$B/node.xz"
fi

echo "device-bundle: finding the packages the CLI imports (esbuild metafile)" >&2
META=$(mktemp -d)
trap 'rm -rf "$META"' EXIT
npx --no-install esbuild trainer/cli/main.ts --bundle --platform=node --format=esm --log-level=error \
  --external:onnxruntime-node --external:isolated-vm --external:playwright-core --external:@sparticuz/chromium \
  --metafile="$META/meta.json" --outfile="$META/cli.mjs" || fail "esbuild could not bundle trainer/cli/main.ts"
node -e '
  const m = require(process.argv[1]);
  const pk = new Set(["tsx", "esbuild", "@esbuild/linux-x64", "onnxruntime-common"]);
  for (const f of Object.keys(m.inputs)) { const r = f.match(/node_modules\/((@[^/]+\/)?[^/]+)/); if (r) pk.add(r[1]); }
  process.stdout.write([...pk].sort().join("\n") + "\n");
' "$META/meta.json" > "$META/packages"
ORT=node_modules/onnxruntime-node
[ -f "$ORT/bin/napi-v6/linux/x64/libonnxruntime.so.1" ] || fail "$ORT has no Linux x64 binaries"
echo "device-bundle: packing $(wc -l < "$META/packages") packages and onnxruntime-node (linux x64)" >&2
# node_modules may be a link (a worktree's): -h follows it, and the packages' own links (.bin) stay out
tar -ch --exclude='node_modules/.bin' --exclude='*/node_modules/.bin' \
  $(sed 's#^#node_modules/#' "$META/packages") \
  "$ORT/package.json" "$ORT/dist" "$ORT/lib" "$ORT/bin/napi-v6/linux/x64" \
  | xz -T0 -6 > "$B/modules.tar.xz.partial" && mv "$B/modules.tar.xz.partial" "$B/modules.tar.xz"

echo "device-bundle: downloading the Vulkan loader and GL dispatch debs" >&2
LISTS=$(mktemp -d)
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$LISTS"
mkdir -p "$LISTS/partial"
apt-get $o update >/dev/null || fail "apt-get update failed"
rm -f "$B"/gl/*.deb
(cd "$B/gl" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 2>&1 | grep -v '^W: Download is performed unsandboxed') || fail "apt-get download failed"
rm -rf "$LISTS"

BUNDLE=$(du -cb "$B"/node.xz "$B"/modules.tar.xz "$B"/gl/*.deb | tail -1 | cut -f1)
TRACKED=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
UNTRACKED=$(git ls-files -z --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
TOTAL=$((BUNDLE + TRACKED + ${UNTRACKED:-0}))
echo "device-bundle: bundle $((BUNDLE / 1048576)) MiB + tracked $((TRACKED / 1048576)) MiB + untracked $((${UNTRACKED:-0} / 1048576)) MiB = $((TOTAL / 1048576)) MiB (the device takes 64 MiB)" >&2
[ "$TOTAL" -lt $((60 * 1048576)) ] || fail "$((TOTAL / 1048576)) MiB would travel: over 60 MiB"
