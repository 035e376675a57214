#!/usr/bin/env bash
# Checks that the C++ and CUDA sources are formatted as .clang-format says,
# with the clang-format Debian ships (14); --fix rewrites them instead.
# Exits 1 naming the files that differ.
set -euo pipefail
cd "$(dirname "$0")/.."

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "format: $CLANG_FORMAT not found (scripts/bootstrap.sh installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  echo "format: rewrote ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: ${#bad[@]} of ${#files[@]} files differ from clang-format ($("$CLANG_FORMAT" --version | grep -o '[0-9][0-9.]*' | head -1)):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "format: run scripts/format.sh --fix" >&2
  exit 1
fi
echo "format: ${#files[@]} files formatted"
