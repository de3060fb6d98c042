#!/usr/bin/env bash
# Fails, naming the files, when a tracked C++ file is not formatted as the
# repository's .clang-format says. Fix with: clang-format -i FILE...
set -euo pipefail
root="${1:?usage: check_format.sh REPOSITORY_ROOT}"
if ! command -v clang-format >/dev/null; then
  echo "clang-format is not installed: scripts/bootstrap test installs it (apt-get install clang-format)" >&2
  exit 1
fi
cd "$root"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.ipp' '*.h' '*.cc')
if [ "${#files[@]}" -eq 0 ]; then
  echo "no C++ files found under $root (is it a git checkout?)" >&2
  exit 1
fi
# One clang-format for all files; its diagnostics name each file that differs.
if report="$(clang-format --dry-run -Werror "${files[@]}" 2>&1)"; then
  echo "all ${#files[@]} C++ files are formatted"
  exit 0
fi
mapfile -t unformatted < <(printf '%s\n' "$report" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
echo "${#unformatted[@]} of ${#files[@]} files are not formatted; run: clang-format -i ${unformatted[*]}" >&2
exit 1
