//! InjectLaunchSecret's options: KubeVirt's `SEVSecretOptions` JSON
//! (`{"header": "...", "secret": "..."}`, both base64 text that libvirt
//! passes to QEMU), read as Go's `encoding/json` reads it into that struct
//! (v1.6.6 cmd-server `InjectLaunchSecret` and manager
//! `InjectLaunchSecret`).

use crate::error::CommandError;

/// KubeVirt's message for options that do not decode.
pub const NO_VALID_SECRET_OPTIONS: &str =
    "No valid secret options present in command server request";

/// The (header, secret) of `options`.
///
/// Go's decoding: `null` is an empty struct, keys match the fields'
/// `header` and `secret` case-insensitively (an exact match wins), other
/// keys are ignored, a key's `null` leaves the field empty; anything else
/// (not JSON, not an object, a field that is not a string) fails with
/// [`NO_VALID_SECRET_OPTIONS`]. Then KubeVirt requires both: `Header is
/// required`, `Secret is required`.
///
/// # Errors
/// [`CommandError::BadRequest`] with KubeVirt's words.
pub fn secret_options(options: &[u8]) -> Result<(String, String), CommandError> {
    let bad = || CommandError::BadRequest(NO_VALID_SECRET_OPTIONS.into());
    let v: serde_json::Value = serde_json::from_slice(options).map_err(|_| bad())?;
    let (header, secret) = match &v {
        serde_json::Value::Null => (String::new(), String::new()),
        serde_json::Value::Object(m) => {
            let field = |name: &str| -> Result<String, CommandError> {
                let value = m
                    .get(name)
                    .or_else(|| {
                        m.iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(name))
                            .map(|(_, v)| v)
                    })
                    .unwrap_or(&serde_json::Value::Null);
                match value {
                    serde_json::Value::Null => Ok(String::new()),
                    serde_json::Value::String(s) => Ok(s.clone()),
                    _ => Err(bad()),
                }
            };
            (field("header")?, field("secret")?)
        }
        _ => return Err(bad()),
    };
    if header.is_empty() {
        return Err(CommandError::BadRequest("Header is required".into()));
    }
    if secret.is_empty() {
        return Err(CommandError::BadRequest("Secret is required".into()));
    }
    Ok((header, secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(options: &str) -> String {
        secret_options(options.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn options_decode_as_go_decodes_them() {
        assert_eq!(
            secret_options(br#"{"header":"aGRy","secret":"c2Vj","other":1}"#).unwrap(),
            ("aGRy".into(), "c2Vj".into())
        );
        assert_eq!(
            secret_options(br#"{"HEADER":"h","Secret":"s"}"#).unwrap(),
            ("h".into(), "s".into())
        );
        for bad in [
            "",
            "not json",
            "[]",
            r#"{"header":1,"secret":"s"}"#,
            "\"x\"",
        ] {
            assert_eq!(msg(bad), NO_VALID_SECRET_OPTIONS, "{bad:?}");
        }
        assert_eq!(msg("null"), "Header is required");
        assert_eq!(msg(r#"{"secret":"s"}"#), "Header is required");
        assert_eq!(msg(r#"{"header":"h","secret":null}"#), "Secret is required");
    }
}
