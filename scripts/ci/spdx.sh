#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/spdx.sh: every source and build file carries the licence line, a comment line
# `// SPDX-License-Identifier: BSL-1.0` (or with `#`) within its first 5 lines (after a #! line).
# Checks the files git tracks and the new ones it does not ignore, so a file from any branch is
# caught; names each file that lacks it and fails. With --fix, adds the line to those files
# (`// ` for C++ and CUDA, `# ` for the rest; after a #! line).
set -euo pipefail
cd "$(dirname "$0")/../.."
line='SPDX-License-Identifier: BSL-1.0'
fix=0
[ "${1:-}" = "--fix" ] && fix=1

# The files that take the line: C++ and CUDA sources, CMake, shell, b2, gnuplot, Doxygen and
# libFuzzer dictionary files, and CI's entry point.
is_source() {
    case "$1" in
    *.hpp | *.ipp | *.cpp | *.h | *.cu | *.cmake | *.cmake.in | */CMakeLists.txt | CMakeLists.txt | \
        *.sh | Jamfile | Jamroot | */Jamfile | *.jam | *.gp | *.dict | */Doxyfile | Doxyfile | .ci/run)
        return 0 ;;
    esac
    return 1
}

prefix() {
    case "$1" in
    *.hpp | *.ipp | *.cpp | *.h | *.cu) echo '// ' ;;
    *) echo '# ' ;;
    esac
}

missing=()
checked=0
while IFS= read -r f; do
    [ -f "$f" ] || continue
    is_source "$f" || continue
    checked=$((checked + 1))
    head -n 5 "$f" | grep -qE "^(//|#) $line\$" && continue
    if [ "$fix" = 1 ]; then
        p=$(prefix "$f")
        if head -n 1 "$f" | grep -q '^#!'; then
            { head -n 1 "$f"; echo "$p$line"; tail -n +2 "$f"; } >"$f.spdx"
        else
            { echo "$p$line"; cat "$f"; } >"$f.spdx"
        fi
        chmod --reference="$f" "$f.spdx"
        mv "$f.spdx" "$f"
        echo "spdx.sh: added to $f"
    else
        missing+=("$f")
    fi
done < <({ git ls-files; git ls-files --others --exclude-standard; } | sort -u)

if [ ${#missing[@]} -gt 0 ]; then
    printf 'spdx.sh: %s has no licence line in its first 5 lines\n' "${missing[@]}" >&2
    echo "spdx.sh: ${#missing[@]} file(s) lack the licence line (bash scripts/ci/spdx.sh --fix)" >&2
    exit 1
fi
echo "spdx.sh: $checked source and build files carry the licence line"
