#!/usr/bin/env bash
# Runs `go test` over every package, as two go test runs side by side: the packages that start
# the local stack, and all the others. Extra arguments go to both (make test passes -race
# -count=1 -timeout 45m).
#
# Why two runs: the local stack owns a fixed port (127.0.0.1:4566, where kumo's Step Functions
# and API Gateway call Lambda), so the packages that start it take turns for it
# (devstack.Options.PortWait). In one `go test ./...`, a package waiting for the port still
# holds one of go test's -p slots (2 on a 2-core machine), and the stack packages come early
# in import-path order: measured here, both slots held stack packages for the first 308 s of a
# 740 s run, one of them only waiting, and nothing else ran. Run apart, they take their turns
# while the rest of the suite runs beside them.
#
# The other packages print go test's usual per-package lines as they finish. The local-stack
# run's output is kept in a file and printed whole when it ends (or when this script is stopped):
# a failing package's block can be long, and two runs writing to one terminal could otherwise
# cut each other's blocks apart. The exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}

# The packages whose tests start the local stack (devstack.Start, e2etest.StartPeerStack, or
# the buyflow-local command itself).
stack_patterns=(./cmd/buyflow-local ./e2e/... ./internal/devstack)

stack=$("$go" list "${stack_patterns[@]}") || exit 1
rest=$("$go" list ./... | grep -vxF "$stack") || exit 1

stack_log=$(mktemp "${TMPDIR:-/tmp}/go-test-stack.XXXXXX") || exit 1
print_stack_log() {
  if [ -n "$stack_log" ]; then
    echo "go-test: the local-stack packages ($(echo $stack | wc -w)):"
    cat "$stack_log"
    rm -f "$stack_log"
    stack_log=
  fi
}
trap print_stack_log EXIT
trap 'kill "${stack_pid:-}" 2>/dev/null; exit 130' INT TERM

"$go" test "$@" $stack >"$stack_log" 2>&1 &
stack_pid=$!
"$go" test "$@" $rest
rest_status=$?
wait "$stack_pid"
stack_status=$?
print_stack_log
if [ "$stack_status" != 0 ]; then
  echo "go-test: the local-stack packages failed" >&2
fi
if [ "$rest_status" != 0 ]; then
  echo "go-test: the other packages failed" >&2
fi
[ "$stack_status" = 0 ] && [ "$rest_status" = 0 ]
