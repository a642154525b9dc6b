#!/usr/bin/env bash
# Every crate of the workspace packages as it would be published: `cargo package --workspace`
# builds each one from its .crate file (unpublished workspace crates come from a local registry),
# so a path dependency without a version, or a source file the package leaves out, fails here.
# Then each crate meant for others has the metadata crates.io shows (cargo only warns) and ships
# both licence files.
set -euo pipefail
cd "$(dirname "$0")/../.."

start=$(date +%s)
# --allow-dirty: what is checked is the packaging, not whether the tree is committed.
cargo package --workspace --allow-dirty
echo "package: cargo package --workspace took $(( $(date +%s) - start )) s"

failed=0
while IFS=$'\t' read -r name publish missing; do
  if [ "$publish" = yes ] && [ -n "$missing" ]; then
    echo "package: $name lacks $missing in its Cargo.toml" >&2
    failed=1
  fi
  files=$(cargo package --allow-dirty --list -p "$name" 2>/dev/null)
  for licence in LICENSE-MIT LICENSE-APACHE; do
    if ! grep -qx "$licence" <<<"$files"; then
      echo "package: $name does not ship $licence (add a symlink to the root's $licence beside its Cargo.toml)" >&2
      failed=1
    fi
  done
done < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
meta = json.load(sys.stdin)
for p in meta["packages"]:
    if p["id"] not in meta["workspace_members"]:
        continue
    # publish: null means any registry; [] means publish = false.
    publish = "no" if p.get("publish") == [] else "yes"
    missing = [k for k in ("description", "license", "readme", "keywords", "categories") if not p.get(k)]
    print(p["name"], publish, ", ".join(missing), sep="\t")
')
[ "$failed" = 0 ] || exit 1
echo "package: every crate packages and ships LICENSE-MIT and LICENSE-APACHE"
