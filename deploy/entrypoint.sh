#!/bin/sh
# guildlore's container entry point.
#
#   guildlore-entrypoint COMMAND [ARGS...]   a guildlore command: run, dashboard, import ...
#   guildlore-entrypoint healthcheck [PORT]  the image's HEALTHCHECK (see below)
#   guildlore-entrypoint PROGRAM [ARGS...]   anything else runs as given (sh, python ...)
#
# The command is exec'd, so guildlore is the container's main process and gets
# its SIGTERM (it drains the ingest queue and closes the database on it).
set -eu

# Every guildlore subcommand (bot/cli.py's COMMANDS; a test keeps them equal).
GUILDLORE_COMMANDS="run dashboard demo import search forget receipt purge-guild snapshot reindex consolidate retry bench migrate-db doctor"

fail() {
    echo "guildlore-entrypoint: $*" >&2
    exit 1
}

# GET /api/memory/health on this container's dashboard: 0 when it answers 200
# with its JSON (the process serves and its database answers), 1 otherwise.
# The port: the argument, else GUILDLORE_DASHBOARD_PORT, else 8765; the
# token: DASHBOARD_TOKEN when set (a dashboard off loopback requires it).
healthcheck() {
    port="${1:-${GUILDLORE_DASHBOARD_PORT:-8765}}"
    exec python3 - "$port" <<'PY'
import json
import os
import sys
import urllib.error
import urllib.request

port = sys.argv[1]
host = os.environ.get("GUILDLORE_DASHBOARD_HOST", "").strip()
if host in ("", "0.0.0.0", "::", "[::]"):
    host = "127.0.0.1"
if ":" in host and not host.startswith("["):
    host = f"[{host}]"
request = urllib.request.Request(f"http://{host}:{port}/api/memory/health")
token = os.environ.get("DASHBOARD_TOKEN", "").strip()
if token:
    request.add_header("Authorization", f"Bearer {token}")
try:
    with urllib.request.urlopen(request, timeout=8) as response:
        body = json.load(response)
except urllib.error.HTTPError as exc:
    sys.exit(f"unhealthy: the dashboard answered {exc.code} {exc.reason}")
except (OSError, ValueError) as exc:
    sys.exit(f"unhealthy: no answer from the dashboard at {host}:{port} ({exc})")
facts = (body.get("facts") or {}).get("active")
messages = (body.get("messages") or {}).get("total")
warnings = "; ".join(body.get("warnings") or []) or "none"
print(f"healthy: {body.get('database')}, {facts} facts, {messages} messages; warnings: {warnings}")
PY
}

# The data folder (SQLite file and memory_journal) must be writable by the
# user the container runs as: a volume created by root is the usual mistake.
check_data_dir() {
    dir="${GUILDLORE_DATA_DIR:-}"
    [ -n "$dir" ] || return 0
    mkdir -p "$dir" 2>/dev/null || true
    if [ ! -d "$dir" ] || [ ! -w "$dir" ]; then
        fail "the data folder $dir is not writable by uid $(id -u); give the volume to that user (chown -R $(id -u):$(id -g)) or run the container as its owner"
    fi
}

if [ "$#" -eq 0 ]; then
    set -- run
fi

case "$1" in
    healthcheck)
        shift
        healthcheck "$@"
        ;;
    -*)
        check_data_dir
        exec guildlore "$@"
        ;;
esac

for command in $GUILDLORE_COMMANDS; do
    if [ "$1" = "$command" ]; then
        check_data_dir
        exec guildlore "$@"
    fi
done
exec "$@"
