#!/usr/bin/env bash
# Run every fuzz target for MINUTES each (default 5) with cargo-fuzz
# (libFuzzer) on the machine's stable toolchain, without a sanitizer (lev is
# safe Rust; a panic, an overflow or a failed assertion is the finding),
# starting from the committed corpus (fuzz/corpus/TARGET) and the seeds the
# tests use (test vectors, protocol fixtures, the example policy). Afterwards
# the corpus is minimized (cargo fuzz cmin) so that what is committed stays
# small. A failing input is left under fuzz/artifacts/TARGET/: fix the bug,
# and commit the input under fuzz/regressions/TARGET/, where the smoke tests
# run it on every `cargo test`.
#
#   bash scripts/fuzz.sh            # every target, 5 minutes each
#   bash scripts/fuzz.sh 60 policy  # one target, an hour
#   LEV_FUZZ_JOBS=2 bash scripts/fuzz.sh 60   # two processes per target
#
# On stable, `cargo test` runs each target's body over its committed corpus
# and a few thousand mutations (the fuzz_smoke tests); this script is the
# long run.
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
    envelope)
      # Each vector's envelope, and the people's vote envelopes inside it.
      python3 - "fuzz/corpus/$target" crates/lev-approval/tests/vectors/*.json <<'PY'
import base64, json, os, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    name = os.path.basename(path)[:-len(".json")]
    envelope = json.load(open(path))["envelope"]
    open(os.path.join(out, f"vector-{name}"), "w").write(json.dumps(envelope))
    try:
        payload = json.loads(base64.b64decode(envelope["payload"]))
    except Exception:
        continue
    for i, vote in enumerate(payload.get("votes") or []):
        if isinstance(vote, dict) and vote.get("envelope"):
            open(os.path.join(out, f"vote-{name}-{i}"), "w").write(json.dumps(vote["envelope"]))
PY
      ;;
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
  mapfile -t targets < <(cd fuzz && cargo fuzz list)
fi
for target in "${targets[@]}"; do
  seed "$target"
  echo "==> fuzz $target for $minutes min"
  parallel=()
  if [ "${LEV_FUZZ_JOBS:-1}" -gt 1 ]; then
    parallel=(-jobs="$LEV_FUZZ_JOBS" -workers="$LEV_FUZZ_JOBS")
  fi
  (cd fuzz && cargo fuzz run -s none "$target" "corpus/$target" -- \
    -max_total_time=$((minutes * 60)) -max_len=8192 -print_final_stats=1 \
    "${parallel[@]}")
  (cd fuzz && cargo fuzz cmin -s none "$target" "corpus/$target" -- -max_len=8192 >/dev/null 2>&1)
  echo "==> $target: $(ls "fuzz/corpus/$target" | wc -l) inputs in the corpus after cmin"
done
