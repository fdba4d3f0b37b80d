#!/usr/bin/env bash
# Soaks the local stack with media buys and prints, every EVERY buys, the resident memory (VmRSS)
# of each of its processes: buyflow-local itself (kumo, the proxies, the simulated agents, the
# fake Slack and the event sink run in it), the local Step Functions (node) and the Lambda
# bootstraps (summed), with buyflow-local's Go heap after a GC (from its --pprof endpoint). Then
# the growth per buy from the first sample after warm-up to the last, and what the ledger table
# holds. The figures are for a reader, not a test: the machine's load moves them.
#
#   scripts/soak-memory.sh [BUYS=200] [EVERY=50] [PARALLEL=4]     (make soak-memory)
#
# It needs bin/host, bin/buyflow-local and bin/buyflow (the make target builds them) and
# node_modules. One local stack runs per machine (it owns 127.0.0.1:4566): it waits up to 10
# minutes for another to end. Each buy is examples/media-buy.json with budgets under the local approval
# threshold (no person in the loop), submitted and followed to its final status by the CLI.
# Heap profiles of the first and last samples are kept (their paths are printed) for
# `go tool pprof -top -base <first> <last>`.
set -euo pipefail
cd "$(dirname "$0")/.."
buys=${1:-200} every=${2:-50} parallel=${3:-4}

work=$(mktemp -d "${TMPDIR:-/tmp}/buyflow-soak-XXXXXX")
jq '.media_buy.packages[0].budget = 3000 | .media_buy.packages[1].budget = 2000' examples/media-buy.json >"$work/buy.json"

bin/buyflow-local --bin bin/host --pprof 127.0.0.1:0 --port-wait 10m --log "$work/functions.log" >"$work/stdout" 2>"$work/stderr" &
stack=$!
trap 'kill -TERM $stack 2>/dev/null; wait $stack 2>/dev/null || true' EXIT
until grep -qs '^buyflow local stack ready' "$work/stdout"; do
	if ! kill -0 $stack 2>/dev/null; then
		cat "$work/stderr" >&2
		exit 1
	fi
	sleep 0.5
done
api=$(sed -n 's/^buyflow local stack ready api=\([^ ]*\).*/\1/p' "$work/stdout")
prof=$(sed -n 's/^profiles: \(.*\)\/debug\/pprof\/$/\1/p' "$work/stderr")
echo "stack pid $stack, api $api, profiles $prof, logs and heap profiles in $work"

# descendants prints the pids of every process under pid $1.
descendants() {
	local kids
	kids=$(cat /proc/"$1"/task/*/children 2>/dev/null || true)
	for k in $kids; do
		echo "$k"
		descendants "$k"
	done
}

rss() { awk '/^VmRSS:/ {print $2}' /proc/"$1"/status 2>/dev/null || echo 0; } # KiB

# sample prints one row: buys, then MiB of buyflow-local, node, the bootstraps, their total,
# and buyflow-local's Go heap in use after a GC (its heap profile is saved as heap-<buys>.pb.gz).
sample() {
	local n=$1 local_kib node_kib=0 boot_kib=0 heap
	curl -sf "$prof/debug/pprof/heap?gc=1" -o "$work/heap-$n.pb.gz"
	heap=$(curl -sf "$prof/debug/pprof/heap?debug=1" | awk '/^# HeapInuse = / {print $4}')
	local_kib=$(rss $stack)
	for p in $(descendants $stack); do
		case $(cat /proc/"$p"/comm 2>/dev/null) in
		node) node_kib=$((node_kib + $(rss "$p"))) ;;
		bootstrap) boot_kib=$((boot_kib + $(rss "$p"))) ;;
		esac
	done
	awk -v n="$n" -v l="$local_kib" -v s="$node_kib" -v b="$boot_kib" -v h="$heap" 'BEGIN {
		printf "%6d %14.1f %10.1f %12.1f %10.1f %14.1f\n", n, l/1024, s/1024, b/1024, (l+s+b)/1024, h/1048576 }' | tee -a "$work/table"
}

# buy submits buy number $1 and follows it; it prints the final status line on failure.
buy() {
	local out
	# One PO number per buy: a second active buy with the same one is refused (409).
	if ! out=$(jq --arg po "SOAK-$1" '.media_buy.po_number = $po' "$work/buy.json" |
		bin/buyflow --endpoint "$api" --tenant soak submit --key "soak-buy-$1" --wait - 2>&1); then
		echo "buy $1: $(tail -n 1 <<<"$out")" >&2
	fi
}
export -f buy
export api work

printf '%6s %14s %10s %12s %10s %14s\n' buys buyflow-local node bootstraps total "go heap inuse"
printf '%6s %14s %10s %12s %10s %14s\n' "" MiB MiB MiB MiB MiB
sample 0
for ((done = 0; done < buys; done += every)); do
	seq $((done + 1)) $((done + every)) | xargs -P "$parallel" -I{} bash -c 'buy {}'
	sample $((done + every))
done

# Growth from the first sample after warm-up (the first batch loads code paths, pools and caches
# once) to the last, per buy.
awk -v first="$every" '
	$1 == first { for (i = 2; i <= 6; i++) base[i] = $i; n0 = $1 }
	{ for (i = 2; i <= 6; i++) last[i] = $i; n1 = $1 }
	END {
		if (n1 <= n0) exit
		printf "per buy (%d..%d) KiB:", n0, n1
		split("buyflow-local node bootstraps total go-heap", name, " ")
		for (i = 2; i <= 6; i++) printf " %s %+.1f", name[i-1], (last[i] - base[i]) * 1024 / (n1 - n0)
		printf "\n"
	}' "$work/table"
# What the ledger table holds, as DynamoDB JSON: kumo keeps every item in memory, in Go
# structures several times that size, for as long as the stack runs (as DynamoDB keeps them).
ddb() {
	curl -sf http://127.0.0.1:4566/ -H 'Content-Type: application/x-amz-json-1.0' -H "X-Amz-Target: DynamoDB_20120810.$1" \
		-H 'Authorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' -d "$2"
}
table=$(ddb ListTables '{}' | jq -r '.TableNames[]' | grep -i ledger | head -n 1)
start='' items=0 bytes=0
while :; do
	page=$(ddb Scan "$(jq -cn --arg t "$table" --argjson k "${start:-null}" '{TableName: $t} + (if $k then {ExclusiveStartKey: $k} else {} end)')")
	items=$((items + $(jq '.Items | length' <<<"$page")))
	bytes=$((bytes + $(jq -c '.Items[]' <<<"$page" | wc -c)))
	start=$(jq -c '.LastEvaluatedKey // empty' <<<"$page")
	[[ -n $start ]] || break
done
awk -v i="$items" -v b="$bytes" -v n="$buys" 'BEGIN {
	printf "ledger table: %d items, %.1f MiB as DynamoDB JSON (%.1f items, %.1f KiB per buy)\n", i, b/1048576, i/n, b/1024/n }'
echo "heap profiles: go tool pprof -top -sample_index=inuse_space -base $work/heap-$every.pb.gz $work/heap-$buys.pb.gz"
