#!/usr/bin/env bash
# Vendors the AdCP JSON Schema releases buyflow validates requests against into
# internal/adcpschemas so that the Lambdas can embed them (a deployed function has no
# ../shared): 3.1.19 from UPSTREAM/adcp-schemas (every file) and 3.2.3 from
# UPSTREAM/adcp-schemas-3.2.3 (the modular buyer subset: bundled/ is left out, since its two
# files inline every reference and the modular files carry the same definitions). Each release
# is packed verbatim into a reproducible gzip'd tar (JSON packs ~10x smaller, which keeps every
# bootstrap under its 12 MB budget); PROVENANCE.md records, per release, where it came from,
# its file count and a digest of every file (a test checks each pack against them). Run it
# again when an upstream folder changes: `make vendor-check` fails while they differ.
#
# Usage: scripts/vendor-adcp-schemas.sh [UPSTREAM]   (default: ../shared beside the checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
upstream=${1:-$root/../shared}
dst=$root/internal/adcpschemas

# release  folder under UPSTREAM  what is left out of the pack (a find -path pattern, or -).
# 3.2.3's PROVENANCE.md (its per-file upstream commits, 150 KB) is copied beside the pack as
# provenance-3.2.3.md instead of packed: no function reads it, and packed it would cost every
# bootstrap that validates requests 35 KB of its 12 MB budget.
releases=(
  "3.1.19 adcp-schemas -"
  "3.2.3 adcp-schemas-3.2.3 ./bundled/*|./PROVENANCE.md"
)

list() { # the files of folder $1 but those matching a pattern of $2 (|-separated), sorted, without ./
  local not=()
  if [ "$2" != - ]; then
    local IFS='|' p
    set -f # the patterns are find's, not the shell's
    for p in $2; do not+=(-not -path "$p"); done
    set +f
  fi
  (cd "$1" && find . -type f "${not[@]}") | LC_ALL=C sort | sed 's|^\./||'
}

{
  echo "# Provenance of the vendored AdCP schemas"
  echo
  echo "Each \`schemas-<release>.tar.gz\` packs, verbatim, the files of an upstream folder (made by"
  echo "\`scripts/vendor-adcp-schemas.sh\`, which \`make vendor-check\` checks against the folder)."
  echo "Each pack holds the folder's README.md or PROVENANCE.md, naming the upstream repository,"
  echo "commits, paths and licence (Apache-2.0), and its LICENSE."
} > "$dst/PROVENANCE.md"

for r in "${releases[@]}"; do
  read -r release folder leftout <<<"$r"
  src=$upstream/$folder
  [ -f "$src/media-buy/create-media-buy-request.json" ] || { echo "no AdCP $release schemas at $src" >&2; exit 1; }
  (cd "$src" && list . "$leftout" |
    tar --owner=0 --group=0 --numeric-owner --mtime=@0 --mode='a+r,u+w,go-w' --no-recursion -T - -cf - |
    gzip -n -9) > "$dst/schemas-$release.tar.gz"
  files=$(list "$src" "$leftout" | wc -l)
  digest=$(cd "$src" && list . "$leftout" | sed 's|^|./|' | tr '\n' '\0' | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  {
    echo
    echo "## $release"
    echo
    echo "- source: ../shared/$folder$([ "$leftout" = - ] || echo " (left out: ${leftout//|/ and }; an upstream PROVENANCE.md is provenance-$release.md beside the pack)")"
    echo "- files: $files"
    echo "- tree digest (sha256 of the sorted per-file sha256 list): $digest"
  } >> "$dst/PROVENANCE.md"
  if [ -f "$src/PROVENANCE.md" ] && [ "$leftout" != - ] && [[ "|$leftout|" == *"|./PROVENANCE.md|"* ]]; then
    cp "$src/PROVENANCE.md" "$dst/provenance-$release.md" && chmod 0644 "$dst/provenance-$release.md"
  fi
  echo "vendored AdCP $release: $files files ($(stat -c %s "$dst/schemas-$release.tar.gz") bytes packed), digest $digest"
done
