#!/usr/bin/env bash
# One nightly retune: re-measure the tuned configuration, search a little, and replace it only on a
# significant win. Exit codes are autotune's: 0 unchanged or improved, 3 regression, 2 error.
# Usage: examples/nightly/retune.sh outputs/<study>/best.yaml [more autotune retune flags]
set -uo pipefail
cd "$(dirname "$0")/../.."

best="${1:?usage: $0 outputs/<study>/best.yaml [autotune retune flags]}"
shift

echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) autotune retune $best $*"
autotune retune "$best" "$@"
status=$?
case "$status" in
    0) echo "== unchanged or improved" ;;
    3) echo "== REGRESSION: see $(dirname "$best")/report.md" ;;
    *) echo "== error (exit $status)" ;;
esac
exit "$status"
