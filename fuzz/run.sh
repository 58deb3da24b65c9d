#!/usr/bin/env bash
# Runs every fuzz target of a2a-core for a bounded time.
#
#   fuzz/run.sh [seconds-per-target]      (default 60)
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Each target starts from its corpus in
# fuzz/corpus/<target> (created and seeded from spec/vectors on first run) and writes any crashing input to
# fuzz/artifacts/<target>/. Exits non-zero as soon as a target finds a crash.
set -euo pipefail

seconds="${1:-60}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# Seed the canonical_json corpus with the inputs of the vector files (valid and invalid).
seed_corpus() {
    local dir="$here/corpus/canonical_json"
    mkdir -p "$dir"
    python3 - "$here/../spec/vectors" "$dir" <<'PY'
import hashlib, json, os, sys
vectors, out = sys.argv[1], sys.argv[2]
for name in ("canonical_json.json", "canonical_json_python.json"):
    for g in json.load(open(os.path.join(vectors, name), encoding="utf-8"))["testGroups"]:
        for t in g["tests"]:
            i = t["input"]
            data = bytes.fromhex(i["hex"]) if "hex" in i else i["json"].encode("utf-8")
            with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)
PY
    mkdir -p "$here/corpus/headers"
    printf '0.3' > "$here/corpus/headers/version"
    printf '["query_status","submit_report"]' > "$here/corpus/headers/capabilities"
    printf '{"process_payment":["eu-west-1"]}' > "$here/corpus/headers/region_map"
    printf ' abc-123_~. ' > "$here/corpus/headers/token"
}

if command -v python3 >/dev/null; then
    seed_corpus
fi

for target in $(cargo +nightly fuzz list); do
    echo "== fuzzing $target for ${seconds}s"
    mkdir -p "corpus/$target"
    cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$seconds" -max_len=4096 -print_final_stats=1
done
