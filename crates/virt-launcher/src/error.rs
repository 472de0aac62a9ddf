//! The launcher's errors and the exit codes they map to.

use converter::ConvertError;
use virtwrap::ManagerError;

use crate::isolation::IsolationError;
use crate::sync::SyncError;

/// Exit code for input the launcher refuses (bad or unsupported VMI).
pub const EXIT_INPUT: u8 = 2;
/// Exit code for a runtime failure.
pub const EXIT_FAILURE: u8 = 1;

/// How the launcher failed, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    /// The VMI or the flags are not acceptable (exit 2).
    #[error("{0}")]
    Input(String),
    /// Something failed while running (exit 1).
    #[error("{0}")]
    Runtime(String),
}

impl LauncherError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            LauncherError::Input(_) => EXIT_INPUT,
            LauncherError::Runtime(_) => EXIT_FAILURE,
        }
    }
}

impl From<IsolationError> for LauncherError {
    fn from(e: IsolationError) -> Self {
        match e {
            IsolationError::Busy(_)
            | IsolationError::Foreign(_)
            | IsolationError::NotADirectory(_) => LauncherError::Input(format!("--state-dir: {e}")),
            _ => LauncherError::Runtime(e.to_string()),
        }
    }
}

/// The class of a domain manager's failure: a VMI that cannot convert, or
/// a volume refused by field, is input; the rest (the host, libvirt) is a
/// runtime failure.
pub(crate) fn manager_error(e: ManagerError) -> LauncherError {
    match e {
        ManagerError::Convert(ConvertError::Host(m)) => LauncherError::Runtime(m),
        ManagerError::Convert(_) | ManagerError::Storage(storage::StorageError::Volume { .. }) => {
            LauncherError::Input(e.to_string())
        }
        other => LauncherError::Runtime(other.to_string()),
    }
}

/// The class of a sync's failure: the pod's network refused for the VMI
/// (network phase 2, SR-IOV) is input, as the manager's input failures.
pub(crate) fn sync_error(e: SyncError) -> LauncherError {
    match e {
        SyncError::Network(m) => LauncherError::Input(m),
        SyncError::Manager(e) => manager_error(e),
    }
}
