//! The launcher's errors: what failed, the field or flag it is about, and
//! the exit code class it maps to (input refused: 2, runtime failure: 1),
//! all kept as data; the one line printed is `<field>: <message>`.

use api::load::LoadError;
use api::FieldError;
use converter::ConvertError;
use storage::StorageError;
use virtwrap::ManagerError;

use crate::isolation::IsolationError;
use crate::sync::SyncError;

/// Exit code for input the launcher refuses (bad or unsupported VMI).
pub const EXIT_INPUT: u8 = 2;
/// Exit code for a runtime failure.
pub const EXIT_FAILURE: u8 = 1;

/// Whose fault a failure is, which decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The VMI or the flags are not acceptable (exit 2).
    Input,
    /// Something failed while running (exit 1).
    Runtime,
}

impl ErrorClass {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorClass::Input => EXIT_INPUT,
            ErrorClass::Runtime => EXIT_FAILURE,
        }
    }
}

/// How the launcher failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LauncherError {
    /// Input or runtime (the exit code).
    pub class: ErrorClass,
    /// The VMI field (`spec.volumes[2].emptyDisk.capacity`) or flag
    /// (`--pvc data=...`) the failure is about, when there is one.
    pub field: Option<String>,
    /// What is wrong, one line.
    pub message: String,
}

impl std::fmt::Display for LauncherError {
    /// `<field>: <message>`, both through [`api::text::error_text`]: input
    /// echoed in them never reaches a terminal or virt-handler with its
    /// control characters, nor longer than the bound.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let message = api::text::error_text(&self.message);
        match &self.field {
            Some(field) => write!(f, "{}: {message}", api::text::cut(field, 1024)),
            None => f.write_str(&message),
        }
    }
}

impl std::error::Error for LauncherError {}

impl LauncherError {
    /// Refused input, about nothing in particular.
    pub fn input(message: impl Into<String>) -> Self {
        LauncherError {
            class: ErrorClass::Input,
            field: None,
            message: message.into(),
        }
    }

    /// Refused input in `field` (a VMI field or a flag).
    pub fn input_at(field: impl Into<String>, message: impl Into<String>) -> Self {
        LauncherError {
            class: ErrorClass::Input,
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// A runtime failure.
    pub fn runtime(message: impl Into<String>) -> Self {
        LauncherError {
            class: ErrorClass::Runtime,
            field: None,
            message: message.into(),
        }
    }

    /// A runtime failure about `field` (a flag's path, say).
    pub fn runtime_at(field: impl Into<String>, message: impl Into<String>) -> Self {
        LauncherError {
            class: ErrorClass::Runtime,
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// The same failure as refused input.
    #[must_use]
    pub fn as_input(mut self) -> Self {
        self.class = ErrorClass::Input;
        self
    }

    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        self.class.exit_code()
    }
}

impl From<FieldError> for LauncherError {
    /// Refused input, the error's path as the field (none when empty).
    fn from(e: FieldError) -> Self {
        if e.path.is_empty() {
            LauncherError::input(e.message)
        } else {
            LauncherError::input_at(e.path, e.message)
        }
    }
}

impl From<LoadError> for LauncherError {
    /// A manifest that does not decode or validate: refused input.
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Field(f) => f.into(),
            syntax @ LoadError::Syntax(_) => LauncherError::input(syntax.to_string()),
        }
    }
}

impl From<ConvertError> for LauncherError {
    /// A spec the converter refuses is input; a host that cannot run it
    /// is a runtime failure.
    fn from(e: ConvertError) -> Self {
        match e {
            ConvertError::Invalid(f) => f.into(),
            ConvertError::Unsupported { path, feature } => {
                LauncherError::input_at(path, format!("{feature} is not supported yet"))
            }
            ConvertError::Host(m) => LauncherError::runtime(m),
        }
    }
}

impl From<StorageError> for LauncherError {
    /// A volume that cannot be prepared, the volume's field named: refused
    /// input (the launcher reads these before anything starts).
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Volume { path, message } => LauncherError::input_at(path, message),
            StorageError::Io {
                path,
                op,
                file,
                source,
            } => LauncherError::input_at(path, format!("{op} {file}: {source}")),
            StorageError::QemuImg { path, source } => {
                LauncherError::input_at(path, source.to_string())
            }
            // A sidecar's failure, not the user's input.
            e @ StorageError::Hook { .. } => LauncherError::runtime(e.to_string()),
        }
    }
}

impl From<network::phase1::Phase1Error> for LauncherError {
    /// A pod link, bridge, tap or rule that could not be made or removed:
    /// the host's failure (the input was checked before phase 1 runs).
    fn from(e: network::phase1::Phase1Error) -> Self {
        LauncherError::runtime(e.to_string())
    }
}

impl From<IsolationError> for LauncherError {
    fn from(e: IsolationError) -> Self {
        match e {
            IsolationError::Busy(_)
            | IsolationError::Foreign(_)
            | IsolationError::NotADirectory(_)
            | IsolationError::Unsafe { .. } => {
                LauncherError::input_at("--state-dir", e.to_string())
            }
            _ => LauncherError::runtime(e.to_string()),
        }
    }
}

impl From<ManagerError> for LauncherError {
    /// A VMI that cannot convert, or a volume refused by field, is input;
    /// the rest (the host, libvirt) is a runtime failure.
    fn from(e: ManagerError) -> Self {
        match e {
            ManagerError::Convert(c) => c.into(),
            ManagerError::Storage(s @ StorageError::Volume { .. }) => s.into(),
            other => LauncherError::runtime(other.to_string()),
        }
    }
}

impl From<SyncError> for LauncherError {
    /// The pod's network refused for the VMI (network phase 2, SR-IOV) is
    /// input, as the manager's input failures.
    fn from(e: SyncError) -> Self {
        match e {
            SyncError::Network(m) => LauncherError::input(m),
            SyncError::Manager(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_field_and_message_and_the_class_gives_the_exit_code() {
        let e = LauncherError::input_at("spec.volumes[2].emptyDisk.capacity", "must be positive");
        assert_eq!(
            e.to_string(),
            "spec.volumes[2].emptyDisk.capacity: must be positive"
        );
        assert_eq!(e.exit_code(), 2);
        let e = LauncherError::runtime("cannot start virtlogd: EPERM");
        assert_eq!(
            (e.to_string().as_str(), e.exit_code()),
            ("cannot start virtlogd: EPERM", 1)
        );
        assert_eq!(e.clone().as_input().exit_code(), 2);
        assert_eq!(
            LauncherError::runtime_at("--state-dir", "x").to_string(),
            "--state-dir: x"
        );
    }

    /// Issue 19: raw terminal escape sequences and 10 MB values were
    /// echoed in error lines. A VMI whose disk bus is an escape sequence
    /// and 10 MB of text: the line has no control character and is cut.
    #[test]
    fn issue19_echoed_input_is_escaped_and_cut() {
        let bus = format!("\u{1b}]0;owned\u{7}\u{1b}[2J{}", "a".repeat(10 << 20));
        let doc = format!(
            "{{\"apiVersion\":\"kubevirt.io/v1\",\"kind\":\"VirtualMachineInstance\",\"metadata\":{{\"name\":\"v\"}},\"spec\":{{\"domain\":{{\"devices\":{{\"disks\":[{{\"name\":\"d\",\"disk\":{{\"bus\":{}}}}}]}}}}}}}}",
            serde_json::to_string(&bus).unwrap()
        );
        let e = match api::load_vmi(doc.as_bytes(), api::Arch::Amd64) {
            Err(e) => LauncherError::from(e),
            Ok(v) => match converter::convert(
                &v,
                &converter::ConvertContext::new(api::Arch::Amd64, converter::VirtType::Kvm),
            ) {
                Err(e) => LauncherError::from(e),
                Ok(_) => panic!("a bus of 10 MB converts"),
            },
        };
        let line = e.to_string();
        assert!(!line.chars().any(char::is_control), "{}", &line[..200]);
        assert!(
            line.len() < api::text::MAX_ERROR_LINE + 1100,
            "{} bytes",
            line.len()
        );
        assert!(line.contains("bytes in all"), "{}", &line[..200]);
    }

    #[test]
    fn typed_errors_keep_their_field_and_class() {
        let e: LauncherError =
            ConvertError::unsupported("spec.domain.devices.gpus[0]", "GPUs").into();
        assert_eq!(e.field.as_deref(), Some("spec.domain.devices.gpus[0]"));
        assert_eq!(
            e.to_string(),
            ConvertError::unsupported("spec.domain.devices.gpus[0]", "GPUs").to_string()
        );
        assert_eq!(e.class, ErrorClass::Input);
        let e: LauncherError = ConvertError::invalid("spec.x", "bad").into();
        assert_eq!(
            (e.field.as_deref(), e.message.as_str()),
            (Some("spec.x"), "bad")
        );
        let e: LauncherError = ConvertError::Host("no KVM".into()).into();
        assert_eq!((e.class, e.field), (ErrorClass::Runtime, None));
        let v = StorageError::Volume {
            path: "spec.volumes[0].containerDisk".into(),
            message: "not qcow2".into(),
        };
        let text = v.to_string();
        let e: LauncherError = v.into();
        assert_eq!((e.to_string(), e.class), (text, ErrorClass::Input));
        let e: LauncherError = ManagerError::Libvirt {
            code: 1,
            domain: 10,
            message: "boom".into(),
        }
        .into();
        assert_eq!(e.class, ErrorClass::Runtime);
        let e: LauncherError = LoadError::Field(FieldError::new("", "a; b")).into();
        assert_eq!((e.field, e.message.as_str()), (None, "a; b"));
        let e: LauncherError =
            SyncError::Network("spec.domain.devices.interfaces[0]: no link".into()).into();
        assert_eq!(e.class, ErrorClass::Input);
    }
}
