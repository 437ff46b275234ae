#!/usr/bin/env bash
# Run every fuzz target for MINUTES each (default 5) with cargo-fuzz on a
# nightly toolchain, starting from the committed corpus (fuzz/corpus/TARGET)
# and the seeds the tests use (test vectors, protocol fixtures, the example
# policy). A crash leaves its input under fuzz/artifacts/TARGET/.
#
#   bash scripts/fuzz.sh            # every target, 5 minutes each
#   bash scripts/fuzz.sh 60 policy  # one target, an hour
#
# On stable, `cargo test` runs each target's body over its seeds and a few
# thousand mutations (the fuzz_smoke tests); this script is the long run.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
shift || true
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
seed() {
  local target="$1"
  mkdir -p "fuzz/corpus/$target"
  case "$target" in
    envelope) cp crates/lev-approval/tests/vectors/*.json "fuzz/corpus/$target/" ;;
    protocol)
      for f in crates/lev-protocol/tests/fixtures/*/*.json; do
        cp "$f" "fuzz/corpus/$target/$(basename "$(dirname "$f")")-$(basename "$f")"
      done ;;
    policy)
      cp examples/policy.toml "fuzz/corpus/$target/example.toml"
      # The example's quorum, uncommented.
      sed -n 's/^# \{0,1\}//p' examples/policy.toml | sed -n '/^\[groups\]/,$p' \
        >"fuzz/corpus/$target/quorum.toml" ;;
    notify)
      for f in crates/lev-protocol/tests/fixtures/interaction/*.json; do
        printf '{"request":%s}' "$(cat "$f")" >"fuzz/corpus/$target/view-$(basename "$f")"
      done
      printf 'payload=%%7B%%22type%%22%%3A%%22block_actions%%22%%2C%%22user%%22%%3A%%7B%%22id%%22%%3A%%22U1%%22%%7D%%2C%%22trigger_id%%22%%3A%%22t%%22%%2C%%22response_url%%22%%3A%%22r%%22%%2C%%22actions%%22%%3A%%5B%%7B%%22action_id%%22%%3A%%22deny%%22%%2C%%22value%%22%%3A%%22ir_1%%22%%7D%%5D%%7D' \
        >"fuzz/corpus/$target/click.form" ;;
  esac
}
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi
for target in "${targets[@]}"; do
  seed "$target"
  echo "==> fuzz $target for $minutes min"
  (cd fuzz && cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time=$((minutes * 60)) -max_len=8192 -print_final_stats=1)
done
