#!/usr/bin/env bash
# tests/integration/test_config_doc.sh — docs/config.md is generated from the
# config key table (config/config_table.c) and docs/config.md.in by
# `make docs`; this regenerates it into a temporary file and fails, naming the
# first differing line, when the committed page is out of date.
set -u
cd "$(dirname "$0")/../.."
gen=build/tests/tools/gen_config_doc
if [ ! -x "$gen" ]; then
  echo "SKIP: $gen not built (make tests)"
  exit 77
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if ! "$gen" docs/config.md.in >"$tmp"; then
  echo "FAIL: $gen docs/config.md.in failed"
  exit 1
fi
if cmp -s "$tmp" docs/config.md; then
  echo "ok   docs/config.md matches the key table ($(wc -l <"$tmp") lines)"
  exit 0
fi
# cmp names the first differing line, or the last line of the shorter file
# ("EOF on FILE after byte N, line L"), in which case line L + 1 differs.
msg=$(cmp "$tmp" docs/config.md 2>&1)
line=$(echo "$msg" | sed -n 's/.*line \([0-9]*\).*/\1/p')
case "$msg" in *EOF*) line=$((line + 1)) ;; esac
echo "FAIL: docs/config.md differs from the generated page at line $line (run 'make docs'):"
echo "  committed: $(sed -n "${line}p" docs/config.md)"
echo "  generated: $(sed -n "${line}p" "$tmp")"
case "$msg" in *EOF*) echo "  (the shorter file ends before line $line)" ;; esac
exit 1
