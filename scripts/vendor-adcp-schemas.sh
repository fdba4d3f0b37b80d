#!/usr/bin/env bash
# Vendors the AdCP JSON Schemas from ../shared/adcp-schemas into internal/adcpschemas so that
# the Lambdas can embed them (a deployed function has no ../shared). The files are packed
# verbatim into a reproducible gzip'd tar (2.4 MB of JSON is ~10x smaller packed, which keeps
# every bootstrap under its 12 MB budget); PROVENANCE.md records where they came from and a
# digest of every file (a test checks the pack against them). Run it again when the upstream
# schemas change: `make vendor-check` fails while the archive and ../shared/adcp-schemas differ.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$root/../shared/adcp-schemas}
dst=$root/internal/adcpschemas
[ -f "$src/README.md" ] || { echo "no AdCP schemas at $src" >&2; exit 1; }
rm -rf "$dst/schemas"
(cd "$src" && find . -type f | LC_ALL=C sort | sed 's|^\./||' |
  tar --owner=0 --group=0 --numeric-owner --mtime=@0 --mode='a+r,u+w,go-w' --no-recursion -T - -cf - |
  gzip -n -9) > "$dst/schemas.tar.gz"
files=$(cd "$src" && find . -type f | wc -l)
digest=$(cd "$src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
{
  echo "# Provenance of the vendored AdCP schemas"
  echo
  echo "\`schemas.tar.gz\` packs, verbatim, every file of \`../shared/adcp-schemas\` (made by"
  echo "\`scripts/vendor-adcp-schemas.sh\`). Its README.md, packed alongside, names the upstream"
  echo "repository, commit, path and licence (Apache-2.0; its LICENSE is packed alongside too)."
  echo
  echo "- source: ../shared/adcp-schemas"
  echo "- files: $files"
  echo "- tree digest (sha256 of the sorted per-file sha256 list): $digest"
} > "$dst/PROVENANCE.md"
echo "vendored $files files ($(stat -c %s "$dst/schemas.tar.gz") bytes packed), digest $digest"
