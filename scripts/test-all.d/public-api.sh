#!/usr/bin/env bash
# The public API of each crate others build on, listed from the compiler's own description of it
# (rustdoc JSON) by scripts/lib/public-api.py, must equal the listing committed in
# docs/public-api/<crate>.txt: any change to the API shows in review as a change to that file.
# After a deliberate change: UPDATE=1 scripts/test-all.d/public-api.sh, and commit the listings.
#
# rustdoc's JSON output is unstable: on a stable toolchain it needs RUSTC_BOOTSTRAP=1 (only for
# this build, in a target directory of its own). Nothing is installed: cargo-public-api would do
# the same listing but takes about 20 minutes to compile here.
set -euo pipefail
cd "$(dirname "$0")/../.."

start=$(date +%s)
target="$PWD/target/public-api"
failed=0
for crate in claude-ide-bridge claude-ide-bridge-text claude-ide-bridge-runtime \
  claude-ide-bridge-smol claude-ide-bridge-blocking; do
  RUSTC_BOOTSTRAP=1 cargo rustdoc -q -p "$crate" --lib --target-dir "$target" \
    -- -Z unstable-options --output-format json
  listing="docs/public-api/$crate.txt"
  fresh=$(python3 scripts/lib/public-api.py "$target/doc/${crate//-/_}.json")
  if [ "${UPDATE:-}" = 1 ]; then
    printf '%s\n' "$fresh" >"$listing"
  elif ! diff -u "$listing" <(printf '%s\n' "$fresh"); then
    echo "public-api: $crate's public API changed (above: - committed, + now); if meant, run" \
      "UPDATE=1 scripts/test-all.d/public-api.sh and commit $listing" >&2
    failed=1
  fi
done
echo "public-api: took $(( $(date +%s) - start )) s"
exit "$failed"
