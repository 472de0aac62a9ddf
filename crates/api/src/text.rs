//! Text from input made fit for an error line: the one place that escapes
//! control characters and cuts long values (issue 19: raw terminal escape
//! sequences and 10 MB names were echoed in error lines).
//!
//! Every sink that prints or returns an error built from input (the
//! launcher's one error line, the guest agent's and libvirt's error text)
//! passes it through [`cut`] or [`error_text`].

/// Most bytes of one line of an error kept by [`error_text`].
pub const MAX_ERROR_LINE: usize = 4096;
/// Most bytes of a whole error kept by [`error_text`].
pub const MAX_ERROR_TEXT: usize = 16 << 10;

/// Pushes `c`, escaped (`\n`, `\u{1b}`) when it is a control character.
fn push_escaped(out: &mut String, c: char) {
    if c.is_control() {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// `text` on one line: every control character escaped (`\n`, `\u{1b}`),
/// cut after `max` bytes (on a character boundary) with the full length
/// noted: `… (N bytes in all)`.
pub fn cut(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if out.len() >= max {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            return out;
        }
        push_escaped(&mut out, c);
    }
    out
}

/// An error's text as printed or returned: lines kept (a multi-line report
/// such as libvirt's schema errors stays readable), every other control
/// character escaped, each line cut after [`MAX_ERROR_LINE`] bytes and the
/// whole after [`MAX_ERROR_TEXT`], each cut noted with the full length.
pub fn error_text(text: &str) -> String {
    if text.len() <= MAX_ERROR_LINE && !text.chars().any(|c| c.is_control() && c != '\n') {
        return text.to_owned();
    }
    let mut out = String::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if out.len() >= MAX_ERROR_TEXT {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            break;
        }
        out.push_str(&cut(line, MAX_ERROR_LINE));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_values_cut() {
        assert_eq!(cut("a\u{1b}[31mb\n", 100), "a\\u{1b}[31mb\\n");
        let long = "é".repeat(1000);
        let c = cut(&long, 11);
        assert_eq!(c, format!("{}… (2000 bytes in all)", "é".repeat(6)));
        assert_eq!(error_text("plain: text"), "plain: text");
        assert_eq!(error_text("two\nlines\u{7}"), "two\nlines\\u{7}");
        let huge = format!("name \u{1b}]0;title\u{7}{}", "a".repeat(10 << 20));
        let e = error_text(&huge);
        assert!(e.len() < MAX_ERROR_LINE + 64, "{}", e.len());
        assert!(!e.chars().any(char::is_control));
        assert!(e.ends_with(&format!("({} bytes in all)", huge.len())));
        let many = "x\n".repeat(1 << 20);
        assert!(error_text(&many).len() < MAX_ERROR_TEXT + 64);
    }
}
