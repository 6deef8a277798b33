#!/usr/bin/env bash
# A CPython test interpreter built from source, once per source:
#   bash scripts/build_cpython.sh SOURCE WORK [CONFIGURE ARG...]
# SOURCE is a CPython source tree or tarball; the interpreter is installed into WORK/python
# with `./configure --prefix=WORK/python --with-ensurepip=install CONFIGURE ARG...`, and the
# path of its `python3.Nt` (or `python3.N`) is printed. The sha256 of the source (or the
# tree's path) is stamped in the prefix: the same source is not built again, another one is,
# and then WORK/venv, made with the old interpreter, is removed. The new prefix replaces the
# old only once `make install` finished, so an interrupted build leaves nothing half-installed.
# CPython's ThreadSanitizer suppressions (Tools/tsan) are kept in WORK/python/share/tsan.
# Used by scripts/freethreaded.sh and scripts/tsan_python.sh; logs in WORK.
set -euo pipefail

SOURCE="$(realpath "$1")"
WORK="$2"
shift 2
PREFIX="$WORK/python"
mkdir -p "$WORK"

if [ -f "$SOURCE" ]; then
    stamp="$(sha256sum "$SOURCE" | cut -d' ' -f1)"
else
    stamp="$SOURCE"
fi
if [ "$(cat "$PREFIX/.source" 2>/dev/null)" != "$stamp" ]; then
    printf 'build_cpython: building CPython from %s (%s); logs in %s\n' "$SOURCE" "$*" "$WORK" >&2
    rm -rf "$WORK/src" "$PREFIX.new" "$WORK/venv"
    mkdir -p "$WORK/src"
    if [ -f "$SOURCE" ]; then
        tar -xf "$SOURCE" -C "$WORK/src" --strip-components=1
    else
        cp -a "$SOURCE/." "$WORK/src/"
    fi
    if [ ! -x "$WORK/src/configure" ]; then
        printf 'build_cpython: %s is not a CPython source tree (no ./configure)\n' "$SOURCE" >&2
        exit 2
    fi
    (
        cd "$WORK/src"
        ./configure --prefix="$PREFIX" --with-ensurepip=install "$@" >"$WORK/configure.log"
        make -j"$(nproc)" >"$WORK/make.log" 2>&1
        make install DESTDIR="$PREFIX.new" >"$WORK/install.log" 2>&1
    )
    rm -rf "$PREFIX"
    mv "$PREFIX.new$PREFIX" "$PREFIX"
    rm -rf "$PREFIX.new"
    mkdir -p "$PREFIX/share/tsan"
    cp "$WORK/src/Tools/tsan/"*.txt "$PREFIX/share/tsan/" 2>/dev/null || true
    rm -rf "$WORK/src"
    echo "$stamp" >"$PREFIX/.source"
fi
# the free-threaded binary (python3.Nt) where there is one
py="$(find "$PREFIX/bin" -maxdepth 1 -name 'python3.*t' -type f | sort | head -n1)"
[ -n "$py" ] || py="$(find "$PREFIX/bin" -maxdepth 1 -name 'python3.[0-9]*' -type f ! -name '*-config' | sort | head -n1)"
echo "$py"
