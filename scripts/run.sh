#!/usr/bin/env bash
# Install everything guildlore needs, then run the main job: the Discord bot when
# DISCORD_TOKEN is set, otherwise the offline demo (sample guild + dashboard).
# Extra arguments go to the chosen command, e.g.  bash scripts/run.sh --port 8090
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -n "${DISCORD_TOKEN:-}" ]; then
  exec .venv/bin/guildlore run "$@"
fi
echo "run.sh: DISCORD_TOKEN is not set, starting the offline demo (see README to run the bot)."
exec .venv/bin/guildlore demo "$@"
