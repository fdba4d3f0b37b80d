#!/usr/bin/env bash
# Vendors the AdCP JSON Schemas from ../shared/adcp-schemas into internal/adcpschemas/schemas so
# that the Lambdas can embed them (a deployed function has no ../shared). The copy is verbatim;
# PROVENANCE.md records where it came from and a digest of every file. Run it again when the
# shared schemas change; a test fails while the two differ.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$root/../shared/adcp-schemas}
dst=$root/internal/adcpschemas/schemas
[ -f "$src/README.md" ] || { echo "no AdCP schemas at $src" >&2; exit 1; }
rm -rf "$dst"
mkdir -p "$dst"
cp -R "$src/." "$dst/"
chmod -R u+w "$dst"
digest=$(cd "$dst" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
{
  echo "# Provenance of the vendored AdCP schemas"
  echo
  echo "Copied verbatim by \`scripts/vendor-adcp-schemas.sh\` from \`../shared/adcp-schemas\`, whose README.md"
  echo "(copied alongside) names the upstream repository, commit, path and licence (Apache-2.0, LICENSE alongside)."
  echo
  echo "- source: ../shared/adcp-schemas"
  echo "- files: $(cd "$dst" && find . -type f | wc -l)"
  echo "- tree digest (sha256 of the sorted per-file sha256 list): $digest"
} > "$root/internal/adcpschemas/PROVENANCE.md"
echo "vendored $(cd "$dst" && find . -type f | wc -l) files, digest $digest"
