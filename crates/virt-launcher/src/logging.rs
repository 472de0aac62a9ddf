//! Logs in KubeVirt's format: the shared `logging` crate, with this
//! component's name.

/// Installs the global logger as component `virt-launcher` (see
/// [`logging::init`]).
pub fn init(verbosity: u32) {
    logging::init("virt-launcher", verbosity);
}
