#!/usr/bin/env bash
# Checks that what the repository vendors from the AdCP reference material is still an
# unmodified copy of it: the schema packs (internal/adcpschemas/schemas-*.tar.gz and the
# doubles' internal/adcptest/schemas-3.2.3.tar.gz, made by scripts/vendor-adcp-schemas.sh) file
# by file against their upstream folders, and every test-vector
# file under testdata/ against the upstream vectors it was copied from (the testdata READMEs
# list the same mapping). `make vendor-check` runs it; .ci/run runs it only where the upstream
# checkout sits beside the repository, since nothing else in the build needs it.
#
# Usage: scripts/vendor-check.sh [UPSTREAM]   (default: ../shared beside the checkout, holding
# adcp-schemas/, adcp-schemas-3.2.3/, adcp-test-vectors/ and adcp-buyer-storyboards/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
upstream=${1:-$root/../shared}
vectors=$upstream/adcp-test-vectors
storyboards=$upstream/adcp-buyer-storyboards
for d in "$upstream/adcp-schemas" "$upstream/adcp-schemas-3.2.3" "$vectors" "$storyboards"; do
  [ -d "$d" ] || { echo "vendor-check: no upstream folder $d (pass the folder holding adcp-schemas/, adcp-schemas-3.2.3/, adcp-test-vectors/ and adcp-buyer-storyboards/)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0

# pack, its upstream folder, and whether it must hold the whole folder (bundled/ and the
# upstream PROVENANCE.md aside) or a selection of it (the requests' closure)
while read -r pack folder whole; do
  dir=$tmp/$(basename "$(dirname "$pack")")-$(basename "$pack" .tar.gz)
  mkdir "$dir"
  tar -xzf "$root/$pack" -C "$dir"
  if [ "$whole" = whole ]; then
    if ! diff -r -x bundled -x PROVENANCE.md "$upstream/$folder" "$dir" >"$tmp.diff" 2>&1; then
      echo "vendor-check: $pack differs from $upstream/$folder:" >&2
      head -40 "$tmp.diff" >&2
      echo "  refresh it with scripts/vendor-adcp-schemas.sh $upstream" >&2
      bad=1
    fi
  else
    while read -r f; do
      if ! cmp -s "$upstream/$folder/$f" "$dir/$f"; then
        echo "vendor-check: $f in $pack differs from $upstream/$folder/$f (refresh with scripts/vendor-adcp-schemas.sh)" >&2
        bad=1
      fi
    done < <(cd "$dir" && find . -type f | sed 's|^\./||')
  fi
  rm -f "$tmp.diff"
done <<'PACKS'
internal/adcpschemas/schemas-3.1.19.tar.gz adcp-schemas whole
internal/adcpschemas/schemas-3.2.3.tar.gz adcp-schemas-3.2.3 selection
internal/adcptest/schemas-3.2.3.tar.gz adcp-schemas-3.2.3 whole
PACKS
if ! cmp -s "$upstream/adcp-schemas-3.2.3/PROVENANCE.md" "$root/internal/adcpschemas/provenance-3.2.3.md"; then
  echo "vendor-check: internal/adcpschemas/provenance-3.2.3.md differs from $upstream/adcp-schemas-3.2.3/PROVENANCE.md" >&2
  bad=1
fi

# vendored path (under the repository) ← upstream path (under adcp-test-vectors/)
while read -r ours theirs; do
  if ! diff -r "$root/$ours" "$vectors/$theirs" >/dev/null 2>&1; then
    echo "vendor-check: $ours differs from $vectors/$theirs (copy it again, unmodified)" >&2
    bad=1
  fi
done <<'MAP'
internal/adcp/testdata/mcp-response-extraction.json static/test-vectors/mcp-response-extraction.json
internal/adcp/testdata/transport-error-mapping.json static/test-vectors/transport-error-mapping.json
internal/webhookauth/testdata/vectors/LICENSE LICENSE
internal/webhookauth/testdata/vectors/webhook-signing static/compliance/source/test-vectors/webhook-signing
internal/webhookauth/testdata/vectors/webhook-hmac-sha256.json static/test-vectors/webhook-hmac-sha256.json
internal/webhookauth/testdata/vectors/webhook-receiver-envelope.json static/compliance/source/test-vectors/webhook-receiver-envelope.json
internal/webhookauth/testdata/vectors/canonicalization.json static/compliance/source/test-vectors/request-signing/canonicalization.json
internal/reqsign/testdata/vectors/request-signing/positive static/compliance/source/test-vectors/request-signing/positive
internal/reqsign/testdata/vectors/request-signing/negative static/compliance/source/test-vectors/request-signing/negative
internal/reqsign/testdata/vectors/request-signing/profile-3.2 static/compliance/source/test-vectors/request-signing/profile-3.2
internal/reqsign/testdata/vectors/request-signing/keys.json static/compliance/source/test-vectors/request-signing/keys.json
internal/reqsign/testdata/vectors/request-signing/body-integrity-policy.json static/compliance/source/test-vectors/request-signing/body-integrity-policy.json
internal/reqsign/testdata/vectors/LICENSE LICENSE
MAP

# The buyer storyboards: each vendored YAML is upstream's with corrections.patch applied (the
# preview's known faults, each listed with why in the folder's PROVENANCE.md); LICENSE unmodified.
ours=$root/internal/buyerstoryboards/testdata
mkdir "$tmp/storyboards"
(cd "$ours" && find specialisms universal -type f) | while read -r f; do
  mkdir -p "$tmp/storyboards/$(dirname "$f")"
  cp "$storyboards/static/compliance/source/$f" "$tmp/storyboards/$f" 2>/dev/null || echo "vendor-check: no upstream $f" >&2
done
if ! (cd "$tmp/storyboards" && patch -s -p1 --no-backup-if-mismatch <"$ours/corrections.patch") >&2 ||
  ! diff -r -x LICENSE -x PROVENANCE.md -x corrections.patch "$tmp/storyboards" "$ours" >&2 ||
  ! cmp -s "$storyboards/LICENSE" "$ours/LICENSE"; then
  echo "vendor-check: internal/buyerstoryboards/testdata is not $storyboards with corrections.patch applied" >&2
  bad=1
fi

[ "$bad" = 0 ] || exit 1
echo "vendor-check: the schema packs ($(cat "$root"/internal/adcpschemas/schemas-*.tar.gz "$root"/internal/adcptest/schemas-*.tar.gz | tar -tzf - -i | wc -l) files), the test vectors and the buyer storyboards (with our corrections) match $upstream"
