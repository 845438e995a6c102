#!/usr/bin/env bash
# Install everything (system packages + .venv with test extras), then run the test suite.
# Extra arguments go to pytest, e.g.  bash scripts/test.sh -k forget
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
set +e
# Two workers (the machine's cores): the engine's tests run on SQLite and on
# PostgreSQL, each worker with a PostgreSQL of its own.
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 "$@"
code=$?
set -e
# pytest exits 5 when it collected no tests: that is a broken suite, not a pass.
if [ "$code" = 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
