#!/bin/bash
# The whole test suite, as root on Debian 12: installs what is missing,
# checks formatting and lints, builds the test guest (cached), then runs the
# unit tests, the converter corpus through libvirt's schema, and the
# end-to-end tests that boot real guests under real libvirt/QEMU (TCG).
set -euo pipefail
cd "$(dirname "$0")"

bash .ci/install
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# A CI clone builds once, cold: incremental data (under target/debug/incremental)
# would cost disk and write time and never be reused. Applies to every cargo
# below (clippy, nextest, the fuzz build; release builds have it off anyway).
export CARGO_INCREMENTAL=0

step() { printf '\n== %s\n' "$*"; }

step "format"
cargo fmt --all --check

step "lint"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The fuzz build is kept outside the clone, so a later run on this machine
# rebuilds only what changed.
fuzz_target_dir=${FUZZ_TARGET_DIR:-/var/cache/virt-launcher/fuzz-target}
step "fuzz targets type-check (a signature they use fails here, not after the tests)"
# The same flags and target directory as the fuzz step below (bench/fuzz.sh
# --check), which then compiles none of the build scripts and proc macros
# again.
FUZZ_TARGET_DIR=$fuzz_target_dir bench/fuzz.sh --check

step "wire check (our .proto files against KubeVirt's field facts)"
tests/wire/check

step "test guest"
tests/guest/build

# KubeVirt's default mode is non-root (uid 107, only NET_BIND_SERVICE, session
# libvirt). The end-to-end suites of the VM's life run whole in that mode:
# NONROOT_SUITES below, with the harness in non-root mode
# (VIRT_LAUNCHER_E2E_NONROOT=1); the rest of the workspace runs as root,
# which is every root-run boot of the other suites (standalone as root:
# system daemons, /etc/libvirt, QEMU as root with dynamic_ownership=0; pod
# mode as root: protocol, names, hooks, migration). BOTH_MODES are the tests
# of those suites that also run as root because the root run takes a path of
# its own that no root-run test of another suite takes; each says which.
# Every test runs once, those of BOTH_MODES twice.
NONROOT_SUITES=(lifecycle volumes network agent memory_dump graceful dirtyrate hotplug nics podbox faults)
BOTH_MODES=(
    # Root's standalone life end to end: the system daemons (virtlogd +
    # libvirtd/virtqemud), SIGTERM's ACPI shutdown with reason Shutdown, and
    # nothing of the launcher's left (RuntimeUser's root column, standalone).
    lifecycle::boots_the_test_guest_and_shuts_it_down_on_sigterm
    # Backend storage: the EFI variable store and swtpm state are mounted at
    # other places per user (RuntimeUser::backend_storage_mounts).
    lifecycle::persistent_efi_variables_and_tpm_state_live_on_backend_storage
    # A root pod makes its private runtime (Pod::runtime_plan; a non-root pod
    # makes none): kubelet's mount in the private directory must survive it.
    volumes::pod_mode_reads_a_config_map_that_kubelet_mounted_in_the_private_directory
    # passt: the system daemon runs it with --runas 0, the session daemon as
    # 107 with its own socket directory (the test asserts each).
    network::passt_guest_gets_the_pods_address_and_its_port_is_forwarded
    # The only root memory dump: the system daemon opens the dump file as
    # root (no chown), the session daemon as 107; the private dump directory
    # is checked against the launcher's own uid.
    memory_dump::memory_dump_into_a_hotplug_volume_completes_and_one_into_a_full_volume_fails
    # The image's pod as root: qemu:///system, the monitor as PID 1 (the
    # test asserts the URI of each mode).
    podbox::pod_in_a_box_runs_a_vmi_under_virt_handler
)
# Non-root only, their root path being the same code as another root test's:
#   lifecycle::pod_mode_runs_the_vmi_from_standalone_vmi (a root pod: the pod
#     tests of protocol, names, hooks),
#   volumes::block_mode_claim_on_a_loop_device_is_read_and_written_by_the_guest,
#   volumes::filesystem_claim_directory_gets_a_sparse_disk_img_that_expand_disks_grows
#     (the same storage code for either user; as root QEMU opens what it is given),
#   network::kubevirt_masquerade_example_works_over_ipv4_and_ipv6 (root
#     masquerade: migration, protocol's pod networks),
#   network::bridge_guest_gets_the_pods_address_and_is_reachable_from_the_node
#     (root bridge and DHCP: protocol's pod and Multus interfaces),
#   agent::agent_info_os_hostname_interfaces_exec_and_ping (the agent through
#     the system daemon: lifecycle's guest-ping above, access_credentials),
#   graceful::sigterm_marks_the_domain_for_graceful_shutdown_and_virt_handler_shuts_it_down
#     (the same shutdown path; a root pod under virt-handler: protocol),
#   podbox::pod_in_a_box_with_a_hook_sidecar_the_guest_reads_its_smbios_vendor
#     (a root sidecar: hooks; a root pod-in-a-box: the podbox test above).
# ... and this test of another suite runs non-root too: the session daemon
# reads its log filters from its own configuration directory
# (RuntimeUser::daemon_config_dir) and QEMU as 107 writes the SeaBIOS log FIFO.
BOTH_MODES+=(firmware::verbosity_six_logs_seabios_and_sets_libvirt_log_filters)

suites_expr=$(printf 'test(/^%s::/) | ' "${NONROOT_SUITES[@]}" | sed 's/ | $//')
both_expr=$(printf 'test(=%s) | ' "${BOTH_MODES[@]}" | sed 's/ | $//')
root_expr="all() - (binary(e2e) & ($suites_expr) - ($both_expr))"
nonroot_expr="binary(e2e) & ($suites_expr | $both_expr)"

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "test.sh: cargo-nextest is needed (.ci/install installs it)" >&2
    exit 1
fi

step "tests as root (unit, converter corpus, end-to-end but the non-root suites)"
cargo nextest run --workspace --locked --no-fail-fast -E "$root_expr"

# --workspace, as the pass above: the same feature unification, so the test
# binary is not rebuilt (with -p virt-launcher a fresh clone rebuilt 30
# crates here, 57 s).
step "end-to-end suites in non-root mode (VIRT_LAUNCHER_E2E_NONROOT=1): ${NONROOT_SUITES[*]}"
VIRT_LAUNCHER_E2E_NONROOT=1 cargo nextest run --workspace --locked --no-fail-fast -E "$nonroot_expr"

step "fuzz (every parser of outside input, a short run each under per-input time and memory limits)"
# bench/fuzz.sh --ci: stable cargo, no sanitizer.
FUZZ_TARGET_DIR=$fuzz_target_dir bench/fuzz.sh --ci

step "test guest smoke (the image itself, booted directly by QEMU)"
tests/guest/smoke

echo
echo "all tests passed"
