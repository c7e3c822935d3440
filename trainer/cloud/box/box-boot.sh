#!/bin/bash
# The boot of a trainer or replica box. sst.config.ts puts this text in each box's user data after the
# ESOPT_BOOT_* assignments that name the stack; trainer/dev/rehearsal/box-install.ts runs the same text into an
# empty directory. Every network step is retried with exponential backoff, and the box writes its boot state
# (step, status, time, error, the log's last lines with the token redacted) to s3://$BUCKET/boxes/$BOX/boot.json
# at each step, on success (`ready`) and on failure (`failed`, then a non-zero exit).
#
# What the box installs is named by the pointer s3://$BUCKET/stack/artifact.json ({"key", "sha256"}), which
# every deploy writes, so a code update never changes the user data (nor replaces the instance).
# `box-boot.sh update VARIABLES_FILE` (the unit's ExecStartPre, as root) installs the artifact the pointer names
# if it is not the one installed, from the variables the boot saved; a failed update keeps the installed one
# and says so (status failed, step update) and tells the service to ignore that artifact (ESOPT_ARTIFACT_SKIP).
#
# Set by the user data: ESOPT_BOOT_BOX (trainer | replica-<i>), ESOPT_BOOT_REGION, ESOPT_BOOT_BUCKET,
# ESOPT_BOOT_TOKEN_PARAMETER, ESOPT_BOOT_EPISODE_FUNCTION,
# ESOPT_BOOT_SERVICE, ESOPT_BOOT_DESCRIPTION, ESOPT_BOOT_ARGS (after `trainer/cli/bin.js`), ESOPT_BOOT_PROVIDER
# (cpu | cuda), ESOPT_BOOT_LOG_GROUP (the CloudWatch group the service ships its log to), ESOPT_BOOT_STOP_TIMEOUT_S.
# Overridable for a rehearsal: ESOPT_BOOT_APP_DIR, ESOPT_BOOT_ENV_FILE, ESOPT_BOOT_UNIT_DIR, ESOPT_BOOT_WORK_DIR,
# ESOPT_BOOT_LOG, ESOPT_BOOT_NODE_DIR, ESOPT_BOOT_STATE_DIR, ESOPT_BOOT_SERVICE_USER, ESOPT_BOOT_ATTEMPTS,
# ESOPT_BOOT_BACKOFF_S, and the steps that need the internet or change the host: ESOPT_BOOT_PACKAGES_STEP,
# ESOPT_BOOT_NODE_STEP, ESOPT_BOOT_USER_STEP, ESOPT_BOOT_NPM_CI_STEP, ESOPT_BOOT_START_STEP (each a command run
# instead of the default).
# The service runs as its own unprivileged user: it reads the app (root's), writes only its state directory.
set -Eeuo pipefail
set +x

MODE=${1:-boot}
if [ "$MODE" = update ]; then
  # shellcheck disable=SC1090
  . "${2:?box-boot.sh update VARIABLES_FILE}"
fi

for required in BOX REGION BUCKET TOKEN_PARAMETER EPISODE_FUNCTION SERVICE DESCRIPTION ARGS PROVIDER LOG_GROUP STOP_TIMEOUT_S; do
  name=ESOPT_BOOT_$required
  if [ -z "${!name:-}" ]; then echo "box boot: $name is not set" >&2; exit 2; fi
done
APP_DIR=${ESOPT_BOOT_APP_DIR:-/opt/esopt}
ENV_FILE=${ESOPT_BOOT_ENV_FILE:-/etc/esopt.env}
UNIT_DIR=${ESOPT_BOOT_UNIT_DIR:-/etc/systemd/system}
WORK_DIR=${ESOPT_BOOT_WORK_DIR:-/var/lib/esopt-boot}
LOG=${ESOPT_BOOT_LOG:-/var/log/esopt-boot.log}
NODE_DIR=${ESOPT_BOOT_NODE_DIR:-/opt/node}
STATE_DIR=${ESOPT_BOOT_STATE_DIR:-/var/lib/esopt}
SERVICE_USER=${ESOPT_BOOT_SERVICE_USER:-esopt}
ATTEMPTS=${ESOPT_BOOT_ATTEMPTS:-6}
BACKOFF_S=${ESOPT_BOOT_BACKOFF_S:-2}
# The official build, checked against the SHA-256 in the release's signed SHASUMS256.txt.
NODE_VERSION=22.21.1
declare -A NODE_SHA256=(
  [x64]=680d3f30b24a7ff24b98db5e96f294c0070f8f9078df658da1bce1b9c9873c88
  [arm64]=e660365729b434af422bcd2e8e14228637ecf24a1de2cd7c916ad48f2a0521e1
)
STATE_KEY="boxes/$ESOPT_BOOT_BOX/boot.json"
POINTER_KEY=stack/artifact.json
STEP=start
TOKEN=
ARTIFACT_SHA256=

mkdir -p "$WORK_DIR" "$(dirname "$LOG")"
# Root-only: a line a step prints could hold a secret.
touch "$LOG" && chmod 600 "$LOG"
# Everything goes to the log (the state's tail is read from it); fd 3 keeps the console for the outcome.
exec 3>&1 >>"$LOG" 2>&1
export PATH="$NODE_DIR/bin:$PATH"

# retry CMD…: runs CMD up to $ATTEMPTS times, waiting $BACKOFF_S, then twice that, … (at most 60 s) in between.
retry() {
  local attempt=1 wait=$BACKOFF_S rc
  while true; do
    "$@" && return 0
    rc=$?
    if [ "$attempt" -ge "$ATTEMPTS" ]; then echo "box boot: gave up after $attempt attempts (exit $rc): $*" >&2; return "$rc"; fi
    echo "box boot: attempt $attempt failed (exit $rc), again in ${wait}s: $*" >&2
    sleep "$wait"
    attempt=$((attempt + 1))
    wait=$(awk -v w="$wait" 'BEGIN { w *= 2; print (w > 60 ? 60 : w) }')
  done
}

# json TEXT: TEXT as a JSON string (control characters dropped).
json() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  s=$(printf '%s' "$s" | tr -d '\000-\037\177')
  printf '"%s"' "$s"
}

# state STATUS [ERROR]: the boot state, written to the bucket (best effort: a boot is not failed by its report).
state() {
  local status=$1 error=${2:-} out="$WORK_DIR/boot.json"
  {
    printf '{"box":%s,"step":%s,"status":%s,"at":%s,' "$(json "$ESOPT_BOOT_BOX")" "$(json "$STEP")" "$(json "$status")" "$(json "$(date -u +%Y-%m-%dT%H:%M:%S.000Z)")"
    if [ -n "$error" ]; then printf '"error":%s,' "$(json "$(redact "$error")")"; fi
    if [ -n "$ARTIFACT_SHA256" ]; then printf '"artifactSha256":%s,' "$(json "$ARTIFACT_SHA256")"; fi
    printf '"log":['
    log_tail_json
    printf ']}\n'
  } >"$out"
  if command -v aws >/dev/null; then
    retry aws s3 cp --only-show-errors --region "$ESOPT_BOOT_REGION" --content-type application/json "$out" "s3://$ESOPT_BOOT_BUCKET/$STATE_KEY" >/dev/null ||
      echo "box boot: could not write $STATE_KEY"
  fi
}

# log_tail_json: the log's last 50 lines as JSON strings, comma-separated, each as `json "$(redact LINE)"` cut
# to 400 characters would give it, in one awk pass (a fork per line made each state report take seconds).
log_tail_json() {
  tail -n 50 "$LOG" 2>/dev/null | ESOPT_BOOT_REDACT="$TOKEN" awk '
    {
      s = $0; t = ENVIRON["ESOPT_BOOT_REDACT"]; out = ""
      if (t != "") { while ((i = index(s, t)) > 0) { out = out substr(s, 1, i - 1) "[redacted]"; s = substr(s, i + length(t)) } }
      s = out s
      gsub(/ESOPT_TOKEN=[^ \t\r\n\v\f]*/, "ESOPT_TOKEN=[redacted]", s)
      s = substr(s, 1, 400)
      gsub(/\\/, "&&", s); gsub(/"/, "\\\"", s); gsub(/\t/, " ", s); gsub(/[\001-\037\177]/, "", s)
      printf "%s\"%s\"", (NR > 1 ? "," : ""), s
    }' || true
}

# redact TEXT: TEXT without the token or anything assigned to ESOPT_TOKEN.
redact() {
  local s=$1
  if [ -n "$TOKEN" ]; then s=${s//"$TOKEN"/[redacted]}; fi
  printf '%s' "$s" | sed -E 's/(ESOPT_TOKEN=)[^[:space:]]*/\1[redacted]/g'
}

step() {
  STEP=$1
  echo "box boot: step $STEP"
  state running
}

on_error() {
  local rc=$? command=$BASH_COMMAND
  trap - ERR
  echo "box boot: step $STEP failed (exit $rc): $command"
  state failed "step $STEP failed (exit $rc): $command"
  { echo "esopt box boot FAILED at step $STEP (exit $rc); s3://$ESOPT_BOOT_BUCKET/$STATE_KEY, $LOG:"; tail -n 20 "$LOG"; } >&3 2>&1 || true
  exit "$rc"
}
trap on_error ERR

packages() {
  command -v aws >/dev/null && return 0
  retry apt-get update -q && DEBIAN_FRONTEND=noninteractive retry apt-get install -y -q awscli
}

node_tarball() {
  local arch
  case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "no Node build pinned for $(uname -m)"; return 1 ;; esac
  local name="node-v$NODE_VERSION-linux-$arch.tar.xz"
  retry curl -fsSL --connect-timeout 20 -o "$WORK_DIR/$name" "https://nodejs.org/dist/v$NODE_VERSION/$name"
  echo "${NODE_SHA256[$arch]}  $WORK_DIR/$name" | sha256sum --check --strict -
  mkdir -p "$NODE_DIR"
  tar -xJf "$WORK_DIR/$name" -C "$NODE_DIR" --strip-components=1 --no-same-owner
}

service_user() {
  id -u "$SERVICE_USER" >/dev/null 2>&1 || useradd --system --user-group --home-dir "$STATE_DIR" --shell /usr/sbin/nologin "$SERVICE_USER"
}

step packages
eval "${ESOPT_BOOT_PACKAGES_STEP:-packages}"

step node
eval "${ESOPT_BOOT_NODE_STEP:-node_tarball}"
node --version

# install_artifact: the artifact the pointer names, unless it is installed already: downloaded, checked by its
# SHA-256, unpacked and given its dependencies beside the installed one, then swapped in whole.
install_artifact() {
  step artifact
  retry aws s3 cp --only-show-errors --region "$ESOPT_BOOT_REGION" "s3://$ESOPT_BOOT_BUCKET/$POINTER_KEY" "$WORK_DIR/artifact.json"
  local key
  read -r key ARTIFACT_SHA256 < <(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); if (!/^artifacts\/esopt-[0-9a-f]{64}\.tgz$/.test(p.key) || !/^[0-9a-f]{64}$/.test(p.sha256)) throw new Error("not an artifact pointer"); console.log(p.key, p.sha256)' "$WORK_DIR/artifact.json")
  if [ -f "$APP_DIR/.artifact-sha256" ] && [ "$(cat "$APP_DIR/.artifact-sha256")" = "$ARTIFACT_SHA256" ]; then
    echo "box boot: artifact $ARTIFACT_SHA256 is installed already"
    return 0
  fi
  retry aws s3 cp --only-show-errors --region "$ESOPT_BOOT_REGION" "s3://$ESOPT_BOOT_BUCKET/$key" "$WORK_DIR/esopt.tgz"
  echo "$ARTIFACT_SHA256  $WORK_DIR/esopt.tgz" | sha256sum --check --strict -

  step unpack
  local next="$APP_DIR.next"
  rm -rf "$next"
  mkdir -p "$next"
  tar -xzf "$WORK_DIR/esopt.tgz" -C "$next" --no-same-owner

  step dependencies
  cd "$next"
  # npm ci removes node_modules before it installs, so each attempt starts clean.
  retry ${ESOPT_BOOT_NPM_CI_STEP:-npm ci --omit=dev --prefer-offline --no-audit --no-fund}
  if [ "$ESOPT_BOOT_PROVIDER" = cuda ]; then
    step cuda
    ONNXRUNTIME_NODE_INSTALL=cuda12 retry node node_modules/onnxruntime-node/script/install.js
  fi
  cd /
  echo "$ARTIFACT_SHA256" >"$next/.artifact-sha256"
  rm -rf "$APP_DIR.old"
  if [ -d "$APP_DIR" ]; then mv "$APP_DIR" "$APP_DIR.old"; fi
  mv "$next" "$APP_DIR"
  rm -rf "$APP_DIR.old"
}

# set_env NAME VALUE: the service's environment file says NAME=VALUE (the line replaced, or added).
set_env() {
  grep -v "^$1=" "$ENV_FILE" >"$ENV_FILE.next" || true
  echo "$1=$2" >>"$ENV_FILE.next"
  chmod 600 "$ENV_FILE.next"
  mv "$ENV_FILE.next" "$ENV_FILE"
}

if [ "$MODE" = update ]; then
  # Before every service start: a failed update must not stop the box, which runs on with what it has.
  trap - ERR
  STEP=update
  echo "box boot: step update"
  # A subshell that is not an if's condition, so that errexit holds in it.
  set +e
  (
    set -Eeuo pipefail
    trap 'exit 1' ERR
    install_artifact
    echo "$ARTIFACT_SHA256" >"$WORK_DIR/installed"
  )
  updated=$?
  set -e
  if [ "$updated" = 0 ]; then
    ARTIFACT_SHA256=$(cat "$WORK_DIR/installed")
    set_env ESOPT_ARTIFACT_SHA256 "$ARTIFACT_SHA256"
    set_env ESOPT_ARTIFACT_SKIP ""
    STEP=ready
    echo "box boot: ready ($ESOPT_BOOT_SERVICE) on artifact $ARTIFACT_SHA256"
    state ready
  else
    refused=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).sha256 ?? "")' "$WORK_DIR/artifact.json" 2>/dev/null || true)
    ARTIFACT_SHA256=$(cat "$APP_DIR/.artifact-sha256" 2>/dev/null || true)
    set_env ESOPT_ARTIFACT_SKIP "$refused"
    STEP=update
    echo "box boot: the update to ${refused:-the deployed artifact} failed; running on $ARTIFACT_SHA256"
    state failed "the update to artifact ${refused:-?} failed; the box runs on ${ARTIFACT_SHA256:-?} (see the log)"
  fi
  exit 0
fi

install_artifact

step token
# Read into a variable, never echoed; the env file is root-only before the token is written into it. The
# service follows the parameter from then on (ESOPT_TOKEN_PARAMETER): a rotation needs no new boot.
TOKEN=$(trap - ERR; retry aws ssm get-parameter --region "$ESOPT_BOOT_REGION" --with-decryption --name "$ESOPT_BOOT_TOKEN_PARAMETER" --query Parameter.Value --output text)
if [ -z "$TOKEN" ] || [ "$TOKEN" = None ]; then echo "the token parameter $ESOPT_BOOT_TOKEN_PARAMETER is empty"; false; fi
mkdir -p "$(dirname "$ENV_FILE")"
install -m 600 /dev/null "$ENV_FILE"
cat >"$ENV_FILE" <<ENV
ESOPT_TOKEN=$TOKEN
ESOPT_BUCKET=$ESOPT_BOOT_BUCKET
ESOPT_EPISODE_FUNCTION=$ESOPT_BOOT_EPISODE_FUNCTION
AWS_REGION=$ESOPT_BOOT_REGION
ESOPT_LOG_GROUP=$ESOPT_BOOT_LOG_GROUP
ESOPT_LOG_STREAM=$ESOPT_BOOT_BOX
ESOPT_ARTIFACT_SHA256=$ARTIFACT_SHA256
ESOPT_TOKEN_PARAMETER=$ESOPT_BOOT_TOKEN_PARAMETER
ENV

step user
eval "${ESOPT_BOOT_USER_STEP:-service_user}"
# The service's only writable place (model cache, home); the app stays root's and read-only to it.
mkdir -p "$STATE_DIR"
chown "$SERVICE_USER:$(id -gn "$SERVICE_USER")" "$STATE_DIR"
chmod 700 "$STATE_DIR"

step service
# What `update` needs before each service start: this script and the variables that name the stack (no secret).
declare -p ${!ESOPT_BOOT_@} >"$WORK_DIR/boot-variables.sh"
chmod 600 "$WORK_DIR/boot-variables.sh"
cp "${BASH_SOURCE[0]}" "$WORK_DIR/box-boot.sh"
mkdir -p "$UNIT_DIR"
cat >"$UNIT_DIR/$ESOPT_BOOT_SERVICE.service" <<UNIT
[Unit]
Description=$ESOPT_BOOT_DESCRIPTION
After=network-online.target
[Service]
User=$SERVICE_USER
EnvironmentFile=$ENV_FILE
Environment=HOME=$STATE_DIR ESOPT_MODEL_CACHE=$STATE_DIR/models
WorkingDirectory=$APP_DIR
# As root ("+"): installs the artifact the deploy's pointer names if it is new (a hand-over restarts the service).
ExecStartPre=+/bin/bash $WORK_DIR/box-boot.sh update $WORK_DIR/boot-variables.sh
ExecStart=$NODE_DIR/bin/node trainer/cli/bin.js $ESOPT_BOOT_ARGS
# SIGTERM lets a run finish the iteration in flight; it is then resumable.
TimeoutStopSec=$ESOPT_BOOT_STOP_TIMEOUT_S
Restart=always
# Hardening: the file system read-only but its state directory and a private /tmp, no privilege to gain
# or keep. Devices stay visible (the GPU's), and memory may be writable and executable (V8's JIT).
ReadWritePaths=$STATE_DIR
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
NoNewPrivileges=yes
CapabilityBoundingSet=
RestrictSUIDSGID=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK
[Install]
WantedBy=multi-user.target
UNIT
eval "${ESOPT_BOOT_START_STEP:-systemctl daemon-reload && systemctl enable --now \"\$ESOPT_BOOT_SERVICE\"}"

STEP=ready
echo "box boot: ready ($ESOPT_BOOT_SERVICE)"
state ready
echo "esopt box boot: ready, $ESOPT_BOOT_SERVICE started" >&3
