//! `<memory>` from `spec.domain.memory.guest` (after defaulting, which falls
//! back to `resources.requests.memory`, then `limits.memory`).

use api::quantity::QuantityRangeError;
use api::VirtualMachineInstance;
use domain::MemoryValue;

use crate::ConvertError;

/// `<memory unit='b'>BYTES</memory>`: KubeVirt writes bytes, fractional
/// quantities rounded down (`2222222200m` → 2222222).
///
/// # Errors
/// [`ConvertError::Invalid`] when no guest memory is set, or it is negative
/// or too large.
pub fn convert(vmi: &VirtualMachineInstance) -> Result<MemoryValue, ConvertError> {
    let path = "spec.domain.memory.guest";
    let guest = vmi
        .spec
        .domain
        .memory
        .as_ref()
        .and_then(|m| m.guest.as_ref())
        .ok_or_else(|| {
            ConvertError::invalid(
                path,
                "no guest memory: set spec.domain.memory.guest or spec.domain.resources.requests.memory",
            )
        })?;
    let bytes = guest.to_bytes().map_err(|e| match e {
        QuantityRangeError::Negative(_) => ConvertError::invalid(
            path,
            format!("Memory size '{guest}' must be greater than or equal to 0"),
        ),
        QuantityRangeError::TooLarge(_) => ConvertError::invalid(path, e.to_string()),
    })?;
    Ok(MemoryValue {
        unit: "b".into(),
        value: bytes,
    })
}
