#!/usr/bin/env bash
# Every crate of the workspace packages as it would be published: `cargo package --workspace`
# builds each one from its .crate file (unpublished workspace crates come from a local registry),
# so a path dependency without a version, or a source file the package leaves out, fails here.
# Then each crate meant for others has the metadata crates.io shows (cargo only warns) and ships
# both licence files.
set -euo pipefail
cd "$(dirname "$0")/../.."

start=$(date +%s)
# The verification builds each crate against the others through a temporary local registry of
# the same name and version every run. cargo extracts a registry crate's sources once (into
# $CARGO_HOME/registry/src) and counts its build fresh as long as the version is the same, so a
# second run would build against the first run's crates. Hence a CARGO_HOME of its own (its own
# crates.io downloads), whose extracted local-registry sources are removed first, and a target
# directory of its own (dependencies built from other source paths would otherwise rebuild those
# in target/), in which the workspace crates' fingerprints are removed first.
# --allow-dirty: what is checked is the packaging, not whether the tree is committed.
# The benchmarks that use the test-support crate (publish = false, as they are) are left out:
# cargo's verification registry holds only crates that may be published, so they cannot be built
# from a .crate file. None of them will ever be on crates.io.
check="$PWD/target/package-check"
mkdir -p "$check/cargo-home"
rm -rf "$check"/cargo-home/registry/src/-* "$check"/target/debug/.fingerprint/claude-ide-bridge-*
# Without debug info or incremental state: the build is only there to be checked, and this keeps
# the check's target directory smaller and its first run faster.
CARGO_HOME="$check/cargo-home" CARGO_PROFILE_DEV_DEBUG=false CARGO_INCREMENTAL=0 \
  cargo package --workspace --exclude claude-ide-bridge-bench-lsp \
    --exclude claude-ide-bridge-bench-idle --exclude claude-ide-bridge-bench-loopback \
    --allow-dirty --target-dir "$check/target"
echo "package: cargo package --workspace took $(( $(date +%s) - start )) s"

# The list first, so that `set -e` sees its failure (a process substitution's status is lost).
crates=$(cargo metadata --no-deps --format-version 1 | python3 -c '
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
failed=0
checked=0
while IFS=$'\t' read -r name publish missing; do
  checked=$((checked + 1))
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
done <<<"$crates"
[ "$failed" = 0 ] || exit 1
# (The workspace has more than ten crates: fewer says the list was cut short.)
[ "$checked" -ge 10 ] || { echo "package: only $checked crates listed" >&2; exit 1; }
echo "package: every crate ($checked) packages and ships LICENSE-MIT and LICENSE-APACHE"

# The program as `cargo install claude-ide-bridge-cli` builds it from crates.io (issue 32, item 7):
# the package's own manifest is then the root, so none of the workspace's [profile] tables apply
# (cargo's default release profile: no LTO, 16 codegen units, debug info stripped; the symbol
# table is left out by program/cli/build.rs).
# Built from a copy of the sources whose root manifest has its profile tables removed; at most
# 8 MB like the binary `cargo install --path program/cli` builds (checked in e2e.sh).
start=$(date +%s)
plain="$PWD/target/default-profile"
rm -rf "$plain/workspace"
mkdir -p "$plain/workspace"
# The files git has or would add (not target directories, node_modules or caches), as they are
# in the working tree: a tracked file deleted but not yet committed is left out.
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done \
  | tar --null -T - -cf - | tar -C "$plain/workspace" -xf -
python3 - "$plain/workspace/Cargo.toml" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
# A table header starts a table; the profile tables are dropped up to the next header.
parts = re.split(r"(?m)^(?=\[)", text)
kept = [p for p in parts if not re.match(r"\[profile[.\]]", p)]
assert len(kept) < len(parts), "no [profile] table in the root manifest"
open(path, "w").write("".join(kept))
PY
cargo build -q --release -p claude-ide-bridge-cli --manifest-path "$plain/workspace/Cargo.toml" \
  --target-dir "$plain/target"
size=$(stat -c %s "$plain/target/release/claude-ide-bridge")
echo "package: without the workspace's profile (cargo install from crates.io) the program is $size bytes (at most 8000000; built in $(( $(date +%s) - start )) s)"
if [ "$size" -gt 8000000 ]; then
  echo "package: the program as crates.io would install it grew past 8 MB" >&2
  exit 1
fi
