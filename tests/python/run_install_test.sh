#!/usr/bin/env bash
# usage: run_install_test.sh BUILD_DIR PYTHON PACKAGE_DIR WORK_DIR
# Installs the project into a scratch prefix and imports the installed ringcast
# package (not the build tree's) with PYTHON: extension, stubs and py.typed.
set -euo pipefail
build=$1 python=$2 package_dir=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
site="$work/prefix/$package_dir"
for f in __init__.py __init__.pyi py.typed; do
  [[ -f $site/ringcast/$f ]] || { echo "not installed: $site/ringcast/$f" >&2; exit 1; }
done
cd "$work"
PYTHONPATH="$site" "$python" -s - "$site" <<'PY'
import sys
import ringcast
assert ringcast.__file__.startswith(sys.argv[1]), ringcast.__file__
ring = ringcast.Ring.create_anonymous(8)
with ring.register_consumer() as c:
    ring.try_push(b"installed")
    assert c.try_recv() == b"installed"
print("python install test: imported", ringcast.__file__)
PY
