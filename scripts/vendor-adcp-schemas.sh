#!/usr/bin/env bash
# Vendors the AdCP JSON Schema releases buyflow validates against, packing each selection of an
# upstream folder verbatim into a reproducible gzip'd tar (JSON packs ~10x smaller, which keeps
# every bootstrap under its 12 MB budget):
#
#   internal/adcpschemas/schemas-3.1.19.tar.gz  every file of UPSTREAM/adcp-schemas
#   internal/adcpschemas/schemas-3.2.3.tar.gz   the closure under $ref of the 3.2.3 request
#                                               schemas buyflow sends: what the Lambdas embed
#   internal/adcptest/schemas-3.2.3.tar.gz      the whole 3.2.3 buyer subset of
#                                               UPSTREAM/adcp-schemas-3.2.3 (requests and the
#                                               answers buyflow reads), for the simulated agents
#
# bundled/ is never packed (its two files inline every reference; the modular files carry the
# same definitions), nor 3.2.3's PROVENANCE.md (per-file upstream commits, 135 KB), which is
# copied beside the packs as internal/adcpschemas/provenance-3.2.3.md. PROVENANCE.md records
# each pack's source, file count and a digest of every file; tests check each pack against it,
# and `make vendor-check` checks every packed file against its upstream copy.
#
# Usage: scripts/vendor-adcp-schemas.sh [UPSTREAM]   (default: ../shared beside the checkout)
# Needs python3 for the $ref closure (a development machine's; nothing at build or test time).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
upstream=${1:-$root/../shared}
prov=$root/internal/adcpschemas/PROVENANCE.md

# The 3.2.3 request schemas buyflow sends (internal/adcp's tool table, schema32 column).
roots32="protocol/get-adcp-capabilities-request.json governance/check-governance-request.json
media-buy/create-media-buy-request.json media-buy/update-media-buy-request.json
media-buy/get-media-buys-request.json media-buy/get-media-buy-delivery-request.json
governance/report-plan-outcome-request.json governance/sync-plans-request.json
protocol/get-task-status-request.json core/tasks-get-request.json core/tasks-list-request.json"

everything() { # every file of folder $1 but bundled/ and PROVENANCE.md, sorted, without ./
  (cd "$1" && find . -type f -not -path './bundled/*' -not -name PROVENANCE.md) | LC_ALL=C sort | sed 's|^\./||'
}

closure() { # the files of folder $1 reached through $ref from the roots $2, with LICENSE
  python3 - "$1" $2 <<'PY'
import json, os, re, sys
folder, todo, seen = sys.argv[1], list(sys.argv[2:]), set()
ref = re.compile(r'^(?:https://adcontextprotocol\.org)?/schemas/3\.2\.3/([^#]+)')
def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)
while todo:
    f = todo.pop()
    if f in seen or not os.path.exists(os.path.join(folder, f)):
        continue
    seen.add(f)
    with open(os.path.join(folder, f), encoding="utf-8") as fh:
        for r in refs(json.load(fh)):
            m = ref.match(r)
            if m:
                todo.append(m.group(1))
print("\n".join(sorted(seen | {"LICENSE"}, key=lambda s: s.encode())))
PY
}

pack() { # pack heading folder out: the files listed on stdin, from UPSTREAM/folder into out
  local heading=$1 folder=$2 out=$3 list
  list=$(cat)
  (cd "$upstream/$folder" && tar --owner=0 --group=0 --numeric-owner --mtime=@0 --mode='a+r,u+w,go-w' \
    --no-recursion -T <(printf '%s\n' "$list") -cf - | gzip -n -9) > "$root/$out"
  local files digest
  files=$(printf '%s\n' "$list" | wc -l)
  digest=$(cd "$upstream/$folder" && printf '%s\n' "$list" | sed 's|^|./|' | tr '\n' '\0' | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  {
    echo
    echo "## $heading"
    echo
    echo "- pack: $out"
    echo "- source: ../shared/$folder"
    echo "- files: $files"
    echo "- tree digest (sha256 of the sorted per-file sha256 list): $digest"
  } >> "$prov"
  echo "vendored $heading: $files files ($(stat -c %s "$root/$out") bytes packed)"
}

for f in adcp-schemas adcp-schemas-3.2.3; do
  [ -f "$upstream/$f/media-buy/create-media-buy-request.json" ] || { echo "no AdCP schemas at $upstream/$f" >&2; exit 1; }
done
{
  echo "# Provenance of the vendored AdCP schemas"
  echo
  echo "Each pack below holds, verbatim, a selection of an upstream folder's files (made by"
  echo "\`scripts/vendor-adcp-schemas.sh\`; \`make vendor-check\` checks every packed file against its"
  echo "upstream copy). The folders' README.md or PROVENANCE.md name the upstream repository,"
  echo "commits, paths and licence (Apache-2.0); 3.2.3's PROVENANCE.md is provenance-3.2.3.md here."
} > "$prov"
everything "$upstream/adcp-schemas" | pack 3.1.19 adcp-schemas internal/adcpschemas/schemas-3.1.19.tar.gz
# shellcheck disable=SC2086 # the roots are words
closure "$upstream/adcp-schemas-3.2.3" "$(echo $roots32)" | pack 3.2.3-requests adcp-schemas-3.2.3 internal/adcpschemas/schemas-3.2.3.tar.gz
everything "$upstream/adcp-schemas-3.2.3" | pack 3.2.3-buyer adcp-schemas-3.2.3 internal/adcptest/schemas-3.2.3.tar.gz
cp "$upstream/adcp-schemas-3.2.3/PROVENANCE.md" "$root/internal/adcpschemas/provenance-3.2.3.md"
chmod 0644 "$root/internal/adcpschemas/provenance-3.2.3.md"
