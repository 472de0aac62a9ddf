#!/bin/bash
# The whole test suite, as root on Debian 12: installs what is missing,
# checks formatting and lints, builds the test guest (cached), then runs the
# unit tests, the converter corpus through libvirt's schema, and the
# end-to-end tests that boot real guests under real libvirt/QEMU (TCG).
set -euo pipefail
cd "$(dirname "$0")"

bash .ci/install
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

step() { printf '\n== %s\n' "$*"; }

step "format"
cargo fmt --all --check

step "lint"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "wire check (our .proto files against KubeVirt's field facts)"
tests/wire/check

step "test guest"
tests/guest/build

step "tests (unit, converter corpus, end-to-end)"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
else
    cargo test --workspace --locked --no-fail-fast
fi

step "fuzz (every parser of outside input, a short run each under per-input time and memory limits)"
# bench/fuzz.sh --ci: stable cargo, no sanitizer; the build is kept outside
# the clone so a later run on this machine rebuilds only what changed.
FUZZ_TARGET_DIR=${FUZZ_TARGET_DIR:-/var/cache/virt-launcher/fuzz-target} bench/fuzz.sh --ci

step "test guest smoke (the image itself, booted directly by QEMU)"
tests/guest/smoke

echo
echo "all tests passed"
