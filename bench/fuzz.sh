#!/usr/bin/env bash
# Fuzzes the VMI decoder and the converter with cargo-fuzz (libFuzzer) for a
# fixed time per target and prints executions and findings.
#
#   bench/fuzz.sh [SECONDS]      # default 60 s per target
#
# Targets (fuzz/fuzz_targets): vmi_bytes (arbitrary bytes → YAML/JSON decoder
# → converter on amd64, arm64, ppc64le, s390x → domain XML → parsed back) and
# vmi_structured (an `Arbitrary` VMI and host facts → defaults, validation →
# converter → XML → parsed back). After the timed runs every input of each
# corpus is replayed once with FUZZ_VALIDATE=1, so every domain the converter
# accepts is also checked by `virt-xml-validate FILE domain` (at most
# VALIDATE_SECONDS, default = SECONDS, per target; this replay is slow: one
# process per XML).
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain
# (`cargo +nightly`); without nightly it tries stable with RUSTC_BOOTSTRAP=1
# (cargo-fuzz passes -Z flags, which only nightly or RUSTC_BOOTSTRAP allow).
# The build uses cargo-fuzz's defaults: AddressSanitizer, debug assertions
# and overflow checks, so an integer overflow is a finding too.
#
# Corpora grow in fuzz/corpus/<target> (not committed); the committed seeds
# are fuzz/seeds/<target>. Crashes are written to fuzz/artifacts/<target>/;
# each one found so far is a unit test in the crate it concerns (api,
# converter, domain). Exit status: 0 without findings, 1 with.
set -euo pipefail

secs=${1:-60}
validate_secs=${VALIDATE_SECONDS:-$secs}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"

command -v cargo-fuzz >/dev/null || {
	echo "fuzz.sh: cargo-fuzz missing: cargo install cargo-fuzz" >&2
	exit 1
}
toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
	toolchain=(+nightly)
	echo "toolchain: nightly ($(rustc +nightly --version))"
else
	export RUSTC_BOOTSTRAP=1
	echo "toolchain: stable with RUSTC_BOOTSTRAP=1 ($(rustc --version))"
fi

cargo "${toolchain[@]}" fuzz build 2>&1 | tail -n 1
bin_dir=target/$(rustc "${toolchain[@]}" -vV | sed -n 's/^host: //p')/release

targets=(vmi_bytes vmi_structured)
findings=0
for t in "${targets[@]}"; do
	mkdir -p "corpus/$t" "artifacts/$t"
	dirs=("corpus/$t")
	[ -d "seeds/$t" ] && dirs+=("seeds/$t")
	opts=(-max_total_time="$secs" -print_final_stats=1)
	[ "$t" = vmi_bytes ] && opts+=(-dict=vmi.dict)
	before=$(find "artifacts/$t" -type f | wc -l)
	log=$(mktemp)
	status=ok
	cargo "${toolchain[@]}" fuzz run "$t" "${dirs[@]}" -- "${opts[@]}" >"$log" 2>&1 || status=crash
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	# A crash ends the run before the final statistics: take libFuzzer's last status line.
	[ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
	after=$(find "artifacts/$t" -type f | wc -l)
	echo "$t: ${secs} s, ${execs:-0} executions (${rate:-?}/s), $cov, corpus $(find "corpus/$t" -type f | wc -l) inputs, new findings $((after - before)) [$status]"
	if [ "$status" = crash ]; then
		findings=$((findings + 1))
		grep -m1 -A3 -E 'panicked at|ERROR: AddressSanitizer|ERROR: libFuzzer' "$log" | sed 's/^/    /'
		grep -m1 -oE 'Test unit written to .*' "$log" | sed 's/^/    /'
	fi
	rm -f "$log"
done

# The slow check: replay each corpus once, validating every accepted domain.
command -v virt-xml-validate >/dev/null || {
	echo "fuzz.sh: virt-xml-validate (libvirt-clients) missing for the validation replay" >&2
	exit 1
}
for t in "${targets[@]}"; do
	log=$(mktemp)
	status=ok
	# The binary itself, so that timeout stops the fuzzer rather than cargo-fuzz.
	FUZZ_VALIDATE=1 timeout "$validate_secs" "$bin_dir/$t" -artifact_prefix="artifacts/$t/validate-" \
		"corpus/$t" -runs=0 >"$log" 2>&1 || status=$?
	n=$(find "corpus/$t" -type f | wc -l)
	case $status in
	ok) echo "$t: virt-xml-validate accepted every domain of the $n corpus inputs" ;;
	124) echo "$t: virt-xml-validate replay stopped after ${validate_secs} s (no rejection so far; $n inputs)" ;;
	*)
		findings=$((findings + 1))
		echo "$t: virt-xml-validate replay FAILED:"
		grep -m1 -A6 -E 'panicked at' "$log" | sed 's/^/    /'
		grep -m1 -oE 'Test unit written to .*' "$log" | sed 's/^/    /'
		;;
	esac
	rm -f "$log"
done
echo "findings: $findings"
[ "$findings" -eq 0 ]
