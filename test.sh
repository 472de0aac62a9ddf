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

# KubeVirt's default mode, non-root (uid 107, only NET_BIND_SERVICE, session
# libvirt): the end-to-end tests whose code paths differ from root's run again
# with the harness in non-root mode (the rest of each suite is mode-blind).
# Cost: 13 tests, 150-225 s with nextest on the 2-core machine (shared with other
# builds when measured): at most ~4 min on top of the rest; the pod-in-a-box
# pair and the verbosity test add ~75 s of test time here (35 + 25 + 15 s,
# measured one at a time), about 40-75 s on the wall clock with nextest; in the
# root pass they add ~25 s each (~80 s of test time).
step "end-to-end tests in non-root mode (VIRT_LAUNCHER_E2E_NONROOT=1)"
nonroot_tests=(
    lifecycle::boots_the_test_guest_and_shuts_it_down_on_sigterm
    lifecycle::pod_mode_runs_the_vmi_from_standalone_vmi
    lifecycle::persistent_efi_variables_and_tpm_state_live_on_backend_storage
    lifecycle::host_disk_is_a_file_on_the_host
    volumes::block_mode_claim_on_a_loop_device_is_read_and_written_by_the_guest
    volumes::filesystem_claim_directory_gets_a_sparse_disk_img_that_expand_disks_grows
    volumes::pod_mode_reads_a_config_map_that_kubelet_mounted_in_the_private_directory
    network::kubevirt_masquerade_example_works_over_ipv4_and_ipv6
    network::bridge_guest_gets_the_pods_address_and_is_reachable_from_the_node
    network::passt_guest_gets_the_pods_address_and_its_port_is_forwarded
    agent::agent_info_os_hostname_interfaces_exec_and_ping
    memory_dump::memory_dump_into_a_hotplug_volume_completes_and_one_into_a_full_volume_fails
    graceful::sigterm_marks_the_domain_for_graceful_shutdown_and_virt_handler_shuts_it_down
    podbox::pod_in_a_box_runs_a_vmi_under_virt_handler
    podbox::pod_in_a_box_with_a_hook_sidecar_the_guest_reads_its_smbios_vendor
    firmware::verbosity_six_logs_seabios_and_sets_libvirt_log_filters
)
if cargo nextest --version >/dev/null 2>&1; then
    # --workspace, as the pass above: the same feature unification, so the
    # test binary is not rebuilt (with -p virt-launcher a fresh clone rebuilt
    # 30 crates here, 57 s).
    VIRT_LAUNCHER_E2E_NONROOT=1 cargo nextest run --workspace --locked --no-fail-fast \
        -E "binary(e2e) & ($(printf 'test(=%s) | ' "${nonroot_tests[@]}" | sed 's/ | $//'))"
else
    VIRT_LAUNCHER_E2E_NONROOT=1 cargo test -p virt-launcher --test e2e --locked --no-fail-fast -- \
        --exact "${nonroot_tests[@]}"
fi

step "fuzz (every parser of outside input, a short run each under per-input time and memory limits)"
# bench/fuzz.sh --ci: stable cargo, no sanitizer; the build is kept outside
# the clone so a later run on this machine rebuilds only what changed.
FUZZ_TARGET_DIR=${FUZZ_TARGET_DIR:-/var/cache/virt-launcher/fuzz-target} bench/fuzz.sh --ci

step "test guest smoke (the image itself, booted directly by QEMU)"
tests/guest/smoke

echo
echo "all tests passed"
