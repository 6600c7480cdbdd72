#!/usr/bin/env bash
# Runs clang-tidy 14 with the repository's .clang-tidy (checks and the reason
# for each exclusion: docs/design.md, "Code style and lint") over the sources
# under src/, and through them the headers under src/ and include/.
#
#   tools/lint.sh               every source file under src/
#   tools/lint.sh FILE...       only these sources (e.g. the ones you changed)
#   tools/lint.sh -j N FILE...  N clang-tidy processes at once (default: nproc)
#
# Uses build/release/compile_commands.json (RINGCAST_LINT_BUILD=DIR for
# another build), and configures the release preset first when it is missing:
# configuring is enough, nothing is compiled (the one generated source, the
# live page, is written at configure time and is not linted). Prints each
# finding and exits 1 if there is any; a clean tree prints one line.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '2,15s/^# \{0,1\}//p' "$0"; }

jobs=$(nproc)
files=()
while (($#)); do
  case $1 in
    -j) jobs=${2:?-j needs a number}; shift 2 ;;
    -j*) jobs=${1#-j}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "lint.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) files+=("$(realpath "$1")"); shift ;;
  esac
done

tidy=${CLANG_TIDY:-clang-tidy}
if ! version=$("$tidy" --version 2>/dev/null); then
  echo "lint.sh: $tidy not found (tools/install-deps.sh installs it)" >&2
  exit 2
fi
[[ $version =~ version\ 14\. ]] || echo "lint.sh: warning: .clang-tidy is written for clang-tidy 14, found: $version" >&2

build=${RINGCAST_LINT_BUILD:-build/release}
if [[ ! -f $build/compile_commands.json ]]; then
  echo "lint.sh: no $build/compile_commands.json: configuring the release preset"
  cmake --preset release >/dev/null
fi

if ((${#files[@]} == 0)); then
  mapfile -t files < <(python3 -c '
import json, sys
root = sys.argv[2] + "/src/"
for f in sorted({e["file"] for e in json.load(open(sys.argv[1]))}):
    if f.startswith(root):
        print(f)' "$build/compile_commands.json" "$root")
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$SECONDS
# One log per file so that parallel runs do not interleave. "N warnings
# generated" counts what the header filter suppressed (system headers).
printf '%s\0' "${files[@]}" | xargs -0 -P "$jobs" -I{} sh -c '
  log="$3/$(printf %s "$2" | tr / _).log"
  "$0" -p "$1" --quiet "$2" >"$log" 2>&1 || echo "$2" >>"$3/failed"
' "$tidy" "$build" {} "$out"

failed=0
[[ -f $out/failed ]] && failed=$(sort -u "$out/failed" | wc -l)
# A header's finding is reported by every file that includes it: print each
# diagnostic (with its notes) once.
cat "$out"/*.log |
  awk '/^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$/ { next }
       /^[^ ].*:[0-9]+:[0-9]+: (warning|error): / { show = !seen[$0]++ } show'
elapsed=$((SECONDS - start))
if ((failed)); then
  echo "lint.sh: findings in $failed of ${#files[@]} files (${elapsed} s); fix them, or NOLINT(check) with the reason"
  exit 1
fi
echo "lint.sh: ${#files[@]} files clean (${elapsed} s)"
