#!/usr/bin/env bash
# Fails when a function in buyflow's own packages is reachable from no program (the Lambdas,
# the CLI, the local stack, the CDK app) and is not listed in scripts/deadcode-kept.txt with
# the reason it stays. Code only tests reach is either moved into the tests or listed.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
DEADCODE_VERSION=v0.39.0
# Test support: what tests and the local stack's harness are for.
support='internal/(adcptest|buytest|devstack|dynamotest|apigwtest|metrics/metricstest|logging/logtest|approvaltest|stagetest|clocktest|buyerstoryboards)/'
found=$($GO run golang.org/x/tools/cmd/deadcode@$DEADCODE_VERSION ./functions/... ./cmd/... ./infra |
  grep -Ev "^($support)" | sed -E 's/^([^:]+):[0-9]+:[0-9]+: unreachable func: (.*)$/\1: \2/' | sort)
kept=$(grep -Ev '^(#|$)' scripts/deadcode-kept.txt | sed -E 's/ *#.*$//' | sort)
unlisted=$(comm -23 <(echo "$found") <(echo "$kept") | sed '/^$/d')
stale=$(comm -13 <(echo "$found") <(echo "$kept") | sed '/^$/d')
if [ -n "$unlisted" ]; then
  echo "reachable from no program (move it into the tests, use it, or list it in scripts/deadcode-kept.txt):" >&2
  echo "$unlisted" >&2
fi
if [ -n "$stale" ]; then
  echo "listed in scripts/deadcode-kept.txt but reachable now (drop the line):" >&2
  echo "$stale" >&2
fi
[ -z "$unlisted" ] && [ -z "$stale" ] && echo "deadcode: every unreachable function is listed ($(echo "$kept" | sed '/^$/d' | wc -l) kept)"
[ -z "$unlisted" ] && [ -z "$stale" ]
