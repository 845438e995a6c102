#!/usr/bin/env bash
# Build the image and smoke-test it without any network: the offline demo
# starts as the non-root user, the HEALTHCHECK passes, pages, static files and
# a search answer, and SIGTERM stops it cleanly.
#
#   bash scripts/container_smoke.sh                 # docker, or podman when there is no docker
#
# On a machine where podman's defaults cannot run (no CAP_SYS_RESOURCE, cgroups
# in hybrid mode; docs/deployment.md), with a base made by debootstrap:
#   RUNTIME="podman --runtime runc" RUN_ARGS="--ulimit nofile=1024:1024 --ulimit nproc=1000:1000" \
#   BUILD_ARGS="--runtime runc $RUN_ARGS --build-arg BASE=localhost/guildlore-base:bookworm" \
#       bash scripts/container_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${RUNTIME:-$(command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && echo docker || echo podman)}
IMAGE=${IMAGE:-localhost/guildlore:smoke}
NAME=guildlore-smoke-$$
TOKEN=smoke-$(date +%s)-token-0123456789
# shellcheck disable=SC2086  # the *_ARGS variables are lists of options on purpose
$RUNTIME build --format docker ${BUILD_ARGS:-} -t "$IMAGE" . >/dev/null
echo "built $IMAGE"
# shellcheck disable=SC2086
$RUNTIME run -d --name "$NAME" --network none ${RUN_ARGS:-} -e DASHBOARD_TOKEN="$TOKEN" \
    "$IMAGE" demo --host 0.0.0.0 --port 8765 >/dev/null
trap '$RUNTIME rm -f "$NAME" >/dev/null 2>&1 || true' EXIT
for _ in $(seq 120); do
    $RUNTIME logs "$NAME" 2>&1 | grep -q "guildlore demo: dashboard at" && break
    sleep 1
done
$RUNTIME logs "$NAME" 2>&1 | grep "guildlore demo: dashboard at"
echo "user: $($RUNTIME exec "$NAME" id -un) (uid $($RUNTIME exec "$NAME" id -u))"
$RUNTIME exec "$NAME" guildlore-entrypoint healthcheck
$RUNTIME exec -e TOKEN="$TOKEN" "$NAME" python3 -c '
import os, urllib.request
for path in ("/", "/static/style.css", "/journal",
             "/api/memory/search?q=paleographer&guildId=1200000000000000001"):
    request = urllib.request.Request("http://127.0.0.1:8765" + path,
                                     headers={"Authorization": "Bearer " + os.environ["TOKEN"]})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    print(f"GET {path}: {response.status}, {len(body)} bytes")
    assert response.status == 200 and body
'
$RUNTIME stop -t 30 "$NAME" >/dev/null
code=$($RUNTIME inspect -f '{{.State.ExitCode}}' "$NAME")
echo "stopped with SIGTERM: exit status $code"
[ "$code" = 0 ]
echo "container smoke test passed"
