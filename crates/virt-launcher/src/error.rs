//! The launcher's errors and the exit codes they map to.

use converter::ConvertError;
use virtwrap::ManagerError;

use crate::isolation::IsolationError;

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

pub(crate) fn manager_error(e: ManagerError) -> LauncherError {
    match e {
        ManagerError::Convert(ConvertError::Host(m)) => LauncherError::Runtime(m),
        ManagerError::Convert(_) | ManagerError::Storage(storage::StorageError::Volume { .. }) => {
            LauncherError::Input(e.to_string())
        }
        other => LauncherError::Runtime(other.to_string()),
    }
}
