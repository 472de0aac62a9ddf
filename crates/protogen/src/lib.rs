//! The gRPC code of `crates/cmd` and `crates/hooks`, generated from their
//! `.proto` files by `protox` (a pure-Rust protobuf compiler, no `protoc`)
//! and `tonic-prost-build`, and checked in under each crate's
//! `src/generated/`.
//!
//! Why checked in rather than made by build scripts: the generators (protox,
//! prost-build, tonic-build and their ~35 crates: miette, logos, petgraph,
//! prettyplease, regex, ...) and the runs of both scripts then leave every
//! build of the launcher, the release build included (issue 20, item 5).
//! `tests/generated.rs` regenerates the code and compares it byte for byte
//! with the checked-in files, so a `.proto` edit without regeneration fails
//! the tests; with `PROTOGEN_UPDATE=1` it rewrites them (and fails, so that
//! it is never left on).
//!
//! Each package's messages and its tonic services are checked in as two
//! files ([`SERVICES_SUFFIX`]), so that the `fuzz/` crate includes the
//! messages of `crates/cmd` without tonic and without generators of its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One crate whose gRPC code is generated: its directory below the
/// workspace root, its `.proto` files (relative to `<dir>/proto`, which is
/// also the only include path).
#[derive(Debug, Clone, Copy)]
pub struct ProtoCrate {
    /// The crate's directory relative to the workspace root (`crates/cmd`).
    pub dir: &'static str,
    /// The `.proto` files compiled, relative to `<dir>/proto`.
    pub protos: &'static [&'static str],
}

/// Both crates. Each gets a client and a server for every service: `cmd`
/// serves the commands and calls notify; the hooks' servers are the
/// sidecar stand-ins of the crate's own tests (the launcher uses the
/// clients only).
pub const CRATES: [ProtoCrate; 2] = [
    ProtoCrate {
        dir: "crates/cmd",
        protos: &[
            "cmd.proto",
            "info.proto",
            "notify.proto",
            "notify_info.proto",
        ],
    },
    ProtoCrate {
        dir: "crates/hooks",
        protos: &[
            "info.proto",
            "v1alpha1.proto",
            "v1alpha2.proto",
            "v1alpha3.proto",
        ],
    },
];

/// Where the generated files of a crate are checked in, below its directory.
pub const GENERATED_DIR: &str = "src/generated";

/// The workspace root (this crate lives in `<root>/crates/protogen`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The suffix of the file holding a package's tonic clients and servers,
/// beside the file of its messages (`kubevirt.cmd.v1.rs` and
/// `kubevirt.cmd.v1.services.rs`). Split so that code needing the messages
/// only (the `fuzz/` crate's `grpc_requests` target) includes them without
/// tonic, hyper and tokio.
pub const SERVICES_SUFFIX: &str = ".services.rs";

/// Compiles `krate`'s `.proto` files below `root` and returns the generated
/// files, by name: per protobuf package, its messages (`kubevirt.cmd.v1.rs`,
/// exactly what prost alone generates) and its clients and servers
/// ([`SERVICES_SUFFIX`]: the rest of tonic-prost-build's output).
///
/// # Errors
/// A message naming the crate when a `.proto` file does not compile, when
/// the generator fails, when its output cannot be read back, or when a
/// package's full output does not begin with its messages-only output (the
/// split would then not be exact).
pub fn generate(root: &Path, krate: &ProtoCrate) -> Result<BTreeMap<String, String>, String> {
    let messages = run_generator(root, krate, false)?;
    let full = run_generator(root, krate, true)?;
    if messages.len() != full.len() || messages.keys().ne(full.keys()) {
        return Err(format!(
            "{}: the messages-only and the full generation wrote different files: {:?} / {:?}",
            krate.dir,
            messages.keys().collect::<Vec<_>>(),
            full.keys().collect::<Vec<_>>()
        ));
    }
    let mut generated = BTreeMap::new();
    for (name, text) in messages {
        // Both runs come from one generator; tonic's service generator only
        // appends its modules after each package's messages.
        let services = full
            .get(&name)
            .and_then(|f| f.strip_prefix(text.as_str()))
            .ok_or_else(|| {
                format!(
                    "{}: {name}: the full output does not begin with the messages-only output",
                    krate.dir
                )
            })?
            .to_owned();
        let stem = name.strip_suffix(".rs").unwrap_or(&name);
        generated.insert(format!("{stem}{SERVICES_SUFFIX}"), services);
        generated.insert(name, text);
    }
    Ok(generated)
}

/// One run of tonic-prost-build over `krate`'s `.proto` files, with clients
/// and servers or without, into a temporary directory; its files by name.
fn run_generator(
    root: &Path,
    krate: &ProtoCrate,
    services: bool,
) -> Result<BTreeMap<String, String>, String> {
    let proto_dir = root.join(krate.dir).join("proto");
    let files: Vec<PathBuf> = krate.protos.iter().map(|f| proto_dir.join(f)).collect();
    let fds = protox::compile(&files, [&proto_dir])
        .map_err(|e| format!("{}: compiling the .proto files: {e}", krate.dir))?;
    let out = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    tonic_prost_build::configure()
        .build_client(services)
        .build_server(services)
        .emit_rerun_if_changed(false)
        .out_dir(out.path())
        .compile_fds(fds)
        .map_err(|e| format!("{}: generating the code: {e}", krate.dir))?;
    let mut generated = BTreeMap::new();
    let entries = std::fs::read_dir(out.path())
        .map_err(|e| format!("reading {}: {e}", out.path().display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("reading {}: {e}", out.path().display()))?
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                format!(
                    "{}: a generated file name that is not UTF-8",
                    path.display()
                )
            })?
            .to_owned();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        generated.insert(name, text);
    }
    Ok(generated)
}
