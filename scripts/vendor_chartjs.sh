#!/usr/bin/env bash
# Refresh the vendored Chart.js (static/staff/vendor/chart.js/) from the npm registry.
#
# The staff quality dashboard (staff/quality.html) plots with Chart.js served by the app itself:
# no CDN, so the pages work offline and under the staff Content-Security-Policy ('self' only).
# This fetches the package tarball with `npm pack` (the registry's ordinary client), checks it
# against the registry's published integrity (sha512), and copies the UMD build and the licence
# unchanged. It rewrites the version, integrity and sha256 lines of the folder's README.md;
# tests/staff/test_quality.py checks that they match the files.
#
# Usage: scripts/vendor_chartjs.sh [VERSION]   (default: the version in README.md)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/static/staff/vendor/chart.js
VERSION=${1:-$(sed -n 's/^- version: //p' "$DEST/README.md")}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
npm pack "chart.js@$VERSION" --silent >/dev/null
TARBALL=chart.js-$VERSION.tgz
WANT=$(npm view "chart.js@$VERSION" dist.integrity)
GOT="sha512-$(openssl dgst -sha512 -binary "$TARBALL" | base64 -w0)"
[ "$WANT" = "$GOT" ] || { echo "integrity mismatch: registry $WANT, tarball $GOT" >&2; exit 1; }
tar xzf "$TARBALL"
cp package/dist/chart.umd.min.js package/LICENSE.md "$DEST/"
SHA=$(sha256sum "$DEST/chart.umd.min.js" | cut -d' ' -f1)
sed -i -e "s/^- version: .*/- version: $VERSION/" -e "s|^- npm integrity: .*|- npm integrity: $WANT|" \
    -e "s/^- sha256 of chart.umd.min.js: .*/- sha256 of chart.umd.min.js: $SHA/" "$DEST/README.md"
echo "Chart.js $VERSION vendored in $DEST (sha256 $SHA)"
