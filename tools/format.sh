#!/usr/bin/env bash
# Formats the C++ sources with clang-format 14 and the repository's .clang-format.
#
#   tools/format.sh               format every C++ file in place
#   tools/format.sh --check       list the files that are not formatted; exit 1 if any
#   tools/format.sh [--check] FILE...   only these files
#
# The files are the tracked *.cpp, *.hpp and *.h under src/ include/ tests/
# bench/ tools/. Not formatted: anything under build/ (the generated live page
# source, the seqlock detector's copy of broadcast_ring_inline.hpp) and *.in
# templates (src/broker/ws/live_page.cpp.in holds a CMake placeholder, not C++).
# tools/test.sh runs --check before it builds anything.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,12s/^# \{0,1\}//p' "$0"; }

check=0
files=()
for arg in "$@"; do
  case $arg in
    --check) check=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "format.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    *) files+=("$arg") ;;
  esac
done

clang_format=${CLANG_FORMAT:-clang-format}
if ! version=$("$clang_format" --version 2>/dev/null); then
  echo "format.sh: $clang_format not found (tools/install-deps.sh installs it)" >&2
  exit 2
fi
# Another major version lays some constructs out differently, so --check would
# report files that are formatted; refuse rather than disagree with CI.
if [[ ! $version =~ version\ 14\. ]]; then
  echo "format.sh: needs clang-format 14 (Debian 12's), found: $version" >&2
  echo "           set CLANG_FORMAT=/path/to/clang-format-14" >&2
  exit 2
fi

if ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files -- 'src/*.cpp' 'src/*.hpp' 'src/*.h' 'include/*.hpp' 'include/*.h' \
    'tests/*.cpp' 'tests/*.hpp' 'tests/*.h' 'bench/*.cpp' 'bench/*.hpp' 'bench/*.h' \
    'tools/*.cpp' 'tools/*.hpp' 'tools/*.h')
fi

jobs=$(nproc)
if ((check == 0)); then
  printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$jobs" "$clang_format" -i --style=file
  exit 0
fi

# A file is formatted when clang-format would not change it.
unformatted=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$jobs" sh -c '"$0" --style=file "$1" | cmp -s - "$1" || echo "$1"' "$clang_format" | sort)
if [[ -n $unformatted ]]; then
  echo "format.sh: $(wc -l <<<"$unformatted") file(s) not formatted as .clang-format says:"
  sed 's/^/  /' <<<"$unformatted"
  echo "run tools/format.sh to format them (git diff shows what changed)"
  exit 1
fi
echo "format.sh: ${#files[@]} files formatted"
