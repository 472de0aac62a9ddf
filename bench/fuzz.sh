#!/usr/bin/env bash
# Fuzzes every parser of outside input with libFuzzer (libfuzzer-sys) for a
# fixed time per target and prints executions and findings.
#
#   bench/fuzz.sh [SECONDS]        # every target, 60 s each by default,
#                                  # then the virt-xml-validate replay
#   bench/fuzz.sh --ci [SECONDS]   # what test.sh runs: 12 s each, two at a
#                                  # time, a 10 s replay, then issue 19's
#                                  # inputs (FUZZ_ISSUE19=1 adds them to a
#                                  # run without --ci)
#   bench/fuzz.sh --inputs TARGET FILE...   # runs TARGET on FILEs under the
#                                  # same per-input limits, one verdict each
#   bench/fuzz.sh --check          # type-checks the targets only (no
#                                  # codegen, no run): what test.sh runs
#                                  # right after the lint, so a signature
#                                  # the targets use fails CI in seconds
#   FUZZ_TARGETS="dhcpv4 dhcpv6" bench/fuzz.sh 120    # some targets only
#
# Targets (fuzz/fuzz_targets, each documents its input and property):
#   vmi_bytes       bytes → YAML/JSON decoder → converter on amd64, arm64,
#                   ppc64le, s390x → domain XML → parsed back
#   vmi_structured  an `Arbitrary` VMI and host facts → defaults,
#                   validation → converter → XML → parsed back
#   agent_replies   text → every guest-agent reply parser; what is accepted
#                   stays inside guest_agent::bounds
#   dhcpv4, dhcpv6  a guest's datagram and a server configuration → the
#                   servers' request decoding and reply encoding
#   network_cache   a phase-1 cache file → network::cache and phase 2's
#                   use of it, up to the DHCP answer
#   grpc_requests   a command-socket request → protobuf decoding (prost)
#                   → VMI JSON (api::load::from_command_json) → defaults,
#                   validation → converter
#   migration_options  MigrateVirtualMachine's options JSON and a VMI's
#                   migrationState → virtwrap::migration's plan
# After the timed runs, each corpus of vmi_bytes and vmi_structured is
# replayed with FUZZ_VALIDATE=1, so every domain the converter accepts is
# also checked by `virt-xml-validate FILE domain` (at most VALIDATE_SECONDS
# per target; slow: one process per XML).
#
# Every input runs under a time and memory limit, so an input whose cost
# has no bound is a finding (a timeout or an out-of-memory), never a hang:
#   FUZZ_TIMEOUT    seconds per input (default 10; libFuzzer -timeout)
#   FUZZ_RSS_MB     the process' resident memory (default 1024; -rss_limit_mb)
#   FUZZ_MALLOC_MB  one allocation (default 256; -malloc_limit_mb, only
#                   with a sanitizer, whose runtime gives libFuzzer its
#                   malloc hooks; without one a huge allocation still
#                   fails the input: Rust aborts, or the RSS limit hits)
# The inputs of issue 19 (fuzz/issue19/make.py) show what they catch.
#
# Build: plain cargo (no cargo-fuzz, no nightly) with cargo-fuzz's flags:
# SanitizerCoverage for libFuzzer, `--cfg fuzzing`, debug assertions and
# overflow checks on (an integer overflow is a finding), opt-level 1 and 16
# codegen units (fuzz/Cargo.toml). FUZZ_SANITIZER: `none` by default (what
# CI runs: stable Rust, the cheapest build), `leak` (its runtime adds the
# malloc hooks and finds leaks; RUSTC_BOOTSTRAP=1 for -Zsanitizer) or
# `address`. One target directory per sanitizer, under FUZZ_TARGET_DIR
# (default fuzz/target; test.sh keeps it outside the clone, so a later CI
# run on the same machine rebuilds only what changed).
#
# Corpora grow in fuzz/corpus/<target> (not committed); the committed seeds
# are fuzz/seeds/<target> (fuzz/seeds/make_seeds.py writes those of the
# newer targets). Findings go to fuzz/artifacts/<target>/ and are printed
# with their input (base64); each one found so far is a unit test in the
# crate it concerns. Exit status: 0 without findings, 1 with.
set -euo pipefail

ci=0
inputs=0
check=0
case ${1:-} in
--ci)
	ci=1
	shift
	;;
--inputs)
	inputs=1
	shift
	;;
--check)
	check=1
	shift
	;;
esac
timeout_s=${FUZZ_TIMEOUT:-10}
rss_mb=${FUZZ_RSS_MB:-1024}
malloc_mb=${FUZZ_MALLOC_MB:-256}
sanitizer=${FUZZ_SANITIZER:-none}
all_targets=(vmi_bytes vmi_structured agent_replies dhcpv4 dhcpv6 network_cache grpc_requests migration_options)
root=$(cd "$(dirname "$0")/.." && pwd)
# --inputs takes paths relative to where it was called.
here=$PWD
cd "$root/fuzz"

# Built by plain cargo with the flags cargo-fuzz passes (SanitizerCoverage
# for libFuzzer's feedback, `--cfg fuzzing`, debug assertions and overflow
# checks), for the host target given explicitly so that build scripts and
# proc macros are not instrumented. Sanitizer `none` needs only stable
# Rust; `leak` and `address` need `-Zsanitizer`, so RUSTC_BOOTSTRAP=1.
host=$(rustc -vV | sed -n 's/^host: //p')
flags=(-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters
	-Cllvm-args=-sanitizer-coverage-pc-table
	-Cllvm-args=-sanitizer-coverage-trace-compares
	--cfg fuzzing -Cdebug-assertions -Coverflow-checks -Ccodegen-units=16)
case $sanitizer in
none) echo "toolchain: $(rustc --version), no sanitizer" ;;
leak | address)
	export RUSTC_BOOTSTRAP=1
	flags+=("-Zsanitizer=$sanitizer")
	echo "toolchain: $(rustc --version) with RUSTC_BOOTSTRAP=1, sanitizer $sanitizer"
	;;
*)
	echo "fuzz.sh: FUZZ_SANITIZER is none, leak or address" >&2
	exit 1
	;;
esac

target_dir=${FUZZ_TARGET_DIR:-$root/fuzz/target}/$sanitizer
t0=$(date +%s)
log=$(mktemp)
# --check: the same command, flags and target directory as the build
# below, as `cargo check`: the build scripts and proc macros it compiles
# are the build's own, so the later build does not repeat them.
if [ "$check" = 1 ]; then
	if ! RUSTFLAGS="${flags[*]}" cargo check --release --locked --bins --target "$host" \
		--target-dir "$target_dir" >"$log" 2>&1; then
		tail -n 40 "$log"
		rm -f "$log"
		echo "fuzz.sh: the fuzz targets do not type-check" >&2
		exit 1
	fi
	rm -f "$log"
	echo "fuzz targets check: $(($(date +%s) - t0)) s (sanitizer $sanitizer, $target_dir)"
	exit 0
fi
if ! RUSTFLAGS="${flags[*]}" cargo build --release --locked --bins --target "$host" \
	--target-dir "$target_dir" >"$log" 2>&1; then
	tail -n 40 "$log"
	rm -f "$log"
	echo "fuzz.sh: the fuzz targets do not build" >&2
	exit 1
fi
rm -f "$log"
echo "build: $(($(date +%s) - t0)) s (sanitizer $sanitizer, $target_dir)"
bin_dir=$target_dir/$host/release

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0:quarantine_size_mb=64}
limits=(-timeout="$timeout_s" -rss_limit_mb="$rss_mb" -malloc_limit_mb="$malloc_mb")

# A finding's input: its file, size and the first 3 KiB in base64.
show_input() {
	local f=$1
	echo "    input: $f ($(stat -c %s "$f") bytes), base64 (first 3 KiB):"
	head -c 3072 "$f" | base64 -w 100 | sed 's/^/      /'
}

# What ended a libFuzzer run: its error line, or the panic.
verdict() {
	grep -m1 -oE 'ERROR: libFuzzer: [a-z-]+( \([^)]*\))?|ERROR: (Address|Leak)Sanitizer: [a-zA-Z-]+|panicked at .*' "$1" || true
}

# Runs target $1 on the files after it, one verdict each, under the
# limits given in $limits; prints "failed: N of M" and returns N > 0.
run_inputs() {
	local t=$1 failed=0 f log started status ms
	shift
	for f in "$@"; do
		[[ $f = /* ]] || f=$here/$f
		log=$(mktemp)
		started=$(date +%s%N)
		status=0
		"$bin_dir/$t" "${limits[@]}" "$f" >"$log" 2>&1 || status=$?
		ms=$((($(date +%s%N) - started) / 1000000))
		if [ "$status" = 0 ]; then
			echo "$(basename "$f"): passes in $ms ms"
		else
			failed=$((failed + 1))
			echo "$(basename "$f"): FAILS after $ms ms: $(verdict "$log")"
		fi
		rm -f "$log"
	done
	echo "failed: $failed of $#"
	[ "$failed" -eq 0 ]
}

if [ "$inputs" = 1 ]; then
	t=${1:?usage: bench/fuzz.sh --inputs TARGET FILE...}
	shift
	echo "limits: ${limits[*]}"
	run_inputs "$t" "$@"
	exit
fi

secs=${1:-$([ "$ci" = 1 ] && echo 12 || echo 60)}
validate_secs=${VALIDATE_SECONDS:-$([ "$ci" = 1 ] && echo 10 || echo "$secs")}
jobs=${FUZZ_JOBS:-$([ "$ci" = 1 ] && echo 2 || echo 1)}
read -r -a targets <<<"${FUZZ_TARGETS:-${all_targets[*]}}"
for t in "${targets[@]}"; do
	[ -x "$bin_dir/$t" ] || {
		echo "fuzz.sh: no target $t (targets: ${all_targets[*]})" >&2
		exit 1
	}
done
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# Fuzzes target $1 for $secs; writes its report to $results/$1.out and
# "finding" to $results/$1.status when it found something.
run_target() {
	local t=$1 log=$results/$1.log
	mkdir -p "corpus/$t" "artifacts/$t"
	local dirs=("corpus/$t")
	[ -d "seeds/$t" ] && dirs+=("seeds/$t")
	local opts=(-max_total_time="$secs" -print_final_stats=1 "${limits[@]}" -artifact_prefix="artifacts/$t/")
	case $t in
	vmi_bytes | grpc_requests) opts+=(-dict=vmi.dict) ;;
	agent_replies) opts+=(-dict=agent.dict) ;;
	esac
	local status=ok started
	started=$(date +%s)
	"$bin_dir/$t" "${opts[@]}" "${dirs[@]}" >"$log" 2>&1 || status=finding
	local took=$(($(date +%s) - started))
	local execs rate rss cov
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	# A finding ends the run before the final statistics: take the last status line.
	[ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1 || true)
	{
		echo "$t: ${took} s, ${execs:-0} executions (${rate:-?}/s), $cov, peak RSS ${rss:-?} MB, corpus $(find "corpus/$t" -type f | wc -l) inputs [$status]"
		if grep -q '^fuzz-caught:' "$log"; then
			echo "    panics inside dhcproto that the decoder caught (packet refused, as in the server):"
			grep '^fuzz-caught:' "$log" | sed 's/^/      /'
		fi
		if [ "$status" = finding ]; then
			echo "    $(verdict "$log")"
			grep -m1 -A8 -E 'panicked at' "$log" | sed 's/^/    /' || true
			local art
			art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
			if [ -n "$art" ] && [ -f "$art" ]; then show_input "$art"; fi
		fi
	} >"$results/$t.out"
	echo "$status" >"$results/$t.status"
}

running=0
for t in "${targets[@]}"; do
	run_target "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
wait
findings=0
for t in "${targets[@]}"; do
	cat "$results/$t.out"
	[ "$(cat "$results/$t.status")" = ok ] || findings=$((findings + 1))
done

# The slow check: replay each corpus once, validating every accepted domain.
command -v virt-xml-validate >/dev/null || {
	echo "fuzz.sh: virt-xml-validate (libvirt-clients) missing for the validation replay" >&2
	exit 1
}
replay() {
	local t=$1 log=$results/$1.replay status=ok n
	# The binary itself, so that timeout stops the fuzzer.
	FUZZ_VALIDATE=1 timeout "$validate_secs" "$bin_dir/$t" -artifact_prefix="artifacts/$t/validate-" \
		"${limits[@]}" "corpus/$t" -runs=0 >"$log" 2>&1 || status=$?
	n=$(find "corpus/$t" -type f | wc -l)
	case $status in
	ok) echo "$t: virt-xml-validate accepted every domain of the $n corpus inputs" ;;
	124) echo "$t: virt-xml-validate replay stopped after ${validate_secs} s (no rejection so far; $n inputs)" ;;
	*)
		echo "$t: virt-xml-validate replay FAILED: $(verdict "$log")"
		grep -m1 -A6 -E 'panicked at' "$log" | sed 's/^/    /' || true
		local art
		art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
		if [ -n "$art" ] && [ -f "$art" ]; then show_input "$art"; fi
		echo finding >"$results/$t.replay-status"
		;;
	esac >"$results/$t.replay-out"
}
replayed=()
if [ "$validate_secs" -gt 0 ]; then
	for t in vmi_bytes vmi_structured; do
		[[ " ${targets[*]} " == *" $t "* ]] || continue
		replay "$t" &
		replayed+=("$t")
	done
	wait
fi
for t in "${replayed[@]}"; do
	cat "$results/$t.replay-out"
	[ ! -f "$results/$t.replay-status" ] || findings=$((findings + 1))
done
# Issue 19's inputs (fuzz/issue19/make.py: an alias bomb, huge thread
# counts, nesting behind a quote, 20,000 and 50,000 emptyDisks) under a
# per-input limit of ISSUE19_TIMEOUT seconds (default 60: each takes at most
# a few seconds now; the quadratic and unbounded costs they were filed for
# took minutes or gigabytes, a failure here).
if [ "$ci" = 1 ] || [ -n "${FUZZ_ISSUE19:-}" ]; then
	cases=$results/issue19
	python3 issue19/make.py "$cases" >/dev/null
	limits=(-timeout="${ISSUE19_TIMEOUT:-60}" -rss_limit_mb="$rss_mb" -malloc_limit_mb="$malloc_mb")
	for t in vmi_bytes grpc_requests; do
		echo "issue 19 inputs, $t (${limits[*]}):"
		run_inputs "$t" "$cases/$t"/* | sed 's/^/    /' || findings=$((findings + 1))
	done
fi
echo "fuzz: $(($(date +%s) - t0)) s in all (build included)"
echo "findings: $findings"
[ "$findings" -eq 0 ]
