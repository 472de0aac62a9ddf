//! GetScreenshot (KubeVirt main `LibvirtDomainManager.GetScreenshot`):
//! libvirt's `virDomainScreenshot` of the primary display (screen 0,
//! flags 0) read from its stream, answered as a PNG.
//!
//! QEMU writes the screen dump as PNG when it can (libvirt then says
//! `image/png`) or as a binary PPM (`image/x-portable-pixmap`, older
//! QEMUs); KubeVirt passes libvirt's bytes and MIME type on, and its API
//! promises a PNG ("Get a PNG VNC screenshot"). This launcher answers a
//! PNG either way: a PNG is checked (its header decodes, its size is
//! bounded) and passed on; a PPM is converted with the `png` crate.
//! Every input is bounded: the stream is read up to
//! [`MAX_STREAM_BYTES`], a picture may have at most [`MAX_PIXELS`] pixels.

use virt::connect::Connect;
use virt::domain::Domain as VirtDomain;
use virt::stream::Stream;

use crate::ManagerError;

/// MIME type of a PNG (what GetScreenshot answers).
pub const MIME_PNG: &str = "image/png";
/// MIME type of the binary PPM older QEMUs write.
pub const MIME_PPM: &str = "image/x-portable-pixmap";
/// Most bytes read from libvirt's stream: a PPM of [`MAX_PIXELS`] pixels
/// with its header.
pub const MAX_STREAM_BYTES: usize = MAX_PIXELS * 3 + 64;
/// Most pixels of a screen: 4096 × 2160 (QEMU's displays stay below).
pub const MAX_PIXELS: usize = 4096 * 2160;

/// Why a screen dump could not be answered (besides libvirt's refusal).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScreenshotError {
    /// libvirt sent more than [`MAX_STREAM_BYTES`].
    #[error("the screen dump is larger than {MAX_STREAM_BYTES} bytes")]
    TooLarge,
    /// libvirt said a type this launcher cannot turn into a PNG.
    #[error("the screen dump is {0:?}, neither {MIME_PNG} nor {MIME_PPM}")]
    Mime(String),
    /// The PPM or PNG did not decode.
    #[error("the screen dump is not a valid {kind}: {why}")]
    Invalid {
        /// `PPM` or `PNG`.
        kind: &'static str,
        /// What is wrong.
        why: String,
    },
}

/// A screen dump turned into a PNG.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Png {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The PNG file.
    pub data: Vec<u8>,
}

/// A binary PPM (`P6`) decoded: width, height, RGB bytes.
///
/// Parsed by hand rather than with an image crate: the header is four
/// whitespace-separated tokens (`P6`, width, height, maxval, with `#`
/// comments) and QEMU writes maxval 255 only; a general image crate would
/// add a dozen codecs to the launcher for it. Refused: another magic, a
/// maxval other than 255, a size of 0 or over [`MAX_PIXELS`], short data.
///
/// # Errors
/// [`ScreenshotError::Invalid`].
pub fn parse_ppm(bytes: &[u8]) -> Result<(u32, u32, &[u8]), ScreenshotError> {
    let bad = |why: &str| ScreenshotError::Invalid {
        kind: "PPM",
        why: why.to_owned(),
    };
    let mut pos = 0;
    let mut tokens = [0u64; 3];
    let mut magic = false;
    let mut n = 0;
    while n < 3 || !magic {
        // Whitespace and comments between tokens.
        loop {
            match bytes.get(pos) {
                Some(b) if b.is_ascii_whitespace() => pos += 1,
                Some(b'#') => {
                    while bytes.get(pos).is_some_and(|b| *b != b'\n') {
                        pos += 1;
                    }
                }
                Some(_) => break,
                None => return Err(bad("the header ends early")),
            }
        }
        let start = pos;
        while bytes.get(pos).is_some_and(|b| !b.is_ascii_whitespace()) && pos - start < 12 {
            pos += 1;
        }
        if bytes.get(pos).is_some_and(|b| !b.is_ascii_whitespace()) {
            return Err(bad("a header token is longer than 12 bytes"));
        }
        let token = &bytes[start..pos];
        if !magic {
            if token != b"P6" {
                return Err(bad("no P6 magic"));
            }
            magic = true;
            continue;
        }
        let text = std::str::from_utf8(token).map_err(|_| bad("a header number is not ASCII"))?;
        tokens[n] = text
            .parse()
            .map_err(|_| bad(&format!("{text:?} is not a number")))?;
        n += 1;
    }
    // Exactly one whitespace byte separates the header from the pixels.
    if !bytes.get(pos).is_some_and(u8::is_ascii_whitespace) {
        return Err(bad("no whitespace after the header"));
    }
    pos += 1;
    let [w, h, maxval] = tokens;
    if maxval != 255 {
        return Err(bad(&format!("maxval {maxval}, not 255")));
    }
    let pixels = w.saturating_mul(h);
    if pixels == 0 || pixels > MAX_PIXELS as u64 {
        return Err(bad(&format!("{w}x{h} pixels (at most {MAX_PIXELS})")));
    }
    let len = usize::try_from(pixels * 3).map_err(|_| bad("too large"))?;
    let data = bytes.get(pos..pos + len).ok_or_else(|| {
        bad(&format!(
            "{} pixel bytes, {len} expected",
            bytes.len() - pos
        ))
    })?;
    let (Ok(w), Ok(h)) = (u32::try_from(w), u32::try_from(h)) else {
        return Err(bad("too large"));
    };
    Ok((w, h, data))
}

/// A binary PPM as a PNG (RGB, 8 bits).
///
/// # Errors
/// [`ScreenshotError::Invalid`].
pub fn ppm_to_png(ppm: &[u8]) -> Result<Png, ScreenshotError> {
    let (width, height, rgb) = parse_ppm(ppm)?;
    let enc_err = |e: png::EncodingError| ScreenshotError::Invalid {
        kind: "PNG",
        why: e.to_string(),
    };
    let mut data = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut data, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(enc_err)?;
        w.write_image_data(rgb).map_err(enc_err)?;
        w.finish().map_err(enc_err)?;
    }
    Ok(Png {
        width,
        height,
        data,
    })
}

/// Checks a PNG QEMU wrote: its header decodes and its size is within
/// [`MAX_PIXELS`].
///
/// # Errors
/// [`ScreenshotError::Invalid`].
pub fn check_png(data: Vec<u8>) -> Result<Png, ScreenshotError> {
    let bad = |why: String| ScreenshotError::Invalid { kind: "PNG", why };
    let (width, height) = {
        let reader = png::Decoder::new(std::io::Cursor::new(&data[..]))
            .read_info()
            .map_err(|e| bad(e.to_string()))?;
        let info = reader.info();
        (info.width, info.height)
    };
    if u64::from(width) * u64::from(height) > MAX_PIXELS as u64 {
        return Err(bad(format!(
            "{width}x{height} pixels (at most {MAX_PIXELS})"
        )));
    }
    Ok(Png {
        width,
        height,
        data,
    })
}

/// The screen dump libvirt sent as `mime`, as a PNG.
///
/// # Errors
/// [`ScreenshotError`].
pub fn to_png(mime: &str, data: Vec<u8>) -> Result<Png, ScreenshotError> {
    match mime {
        MIME_PNG => check_png(data),
        MIME_PPM => ppm_to_png(&data),
        other => Err(ScreenshotError::Mime(crate::agent::bounds::cut(other))),
    }
}

/// libvirt's screen dump of `dom`'s primary display: (MIME type, bytes),
/// read from a stream on `conn` up to [`MAX_STREAM_BYTES`].
///
/// # Errors
/// [`ManagerError::Libvirt`] (e.g. `Requested operation is not valid: no
/// screens to take screenshot from` for a domain without a display),
/// [`ManagerError::Screenshot`] when libvirt sends too much.
pub fn capture(conn: &Connect, dom: &VirtDomain) -> Result<(String, Vec<u8>), ManagerError> {
    let stream = Stream::new(conn, 0)?;
    let mime = dom.screenshot(&stream, 0, 0)?;
    let mut data = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = stream.recv(&mut buf)?;
        if n == 0 {
            break;
        }
        if data.len() + n > MAX_STREAM_BYTES {
            let _ = stream.abort();
            return Err(ScreenshotError::TooLarge.into());
        }
        data.extend_from_slice(&buf[..n]);
    }
    stream.finish()?;
    Ok((mime, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ppm(w: u32, h: u32, header_extra: &str) -> Vec<u8> {
        let mut v = format!("P6\n{header_extra}{w} {h}\n255\n").into_bytes();
        for i in 0..w * h {
            v.extend_from_slice(&[(i % 256) as u8, (i / 7 % 256) as u8, 200]);
        }
        v
    }

    /// QEMU's PPM becomes a PNG with the same size and pixels.
    #[test]
    fn ppm_becomes_an_equal_png() {
        let src = ppm(33, 17, "# made by a test\n");
        let png = to_png(MIME_PPM, src.clone()).unwrap();
        assert_eq!((png.width, png.height), (33, 17));
        let mut reader = png::Decoder::new(std::io::Cursor::new(&png.data[..]))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let (_, _, rgb) = parse_ppm(&src).unwrap();
        assert_eq!(&buf[..info.buffer_size()], rgb);
        // A PNG passes through unchanged (its header checked).
        let again = to_png(MIME_PNG, png.data.clone()).unwrap();
        assert_eq!(again, png);
    }

    #[test]
    fn bad_screen_dumps_are_refused_by_what_is_wrong() {
        let msg = |mime: &str, b: &[u8]| to_png(mime, b.to_vec()).unwrap_err().to_string();
        assert!(msg(MIME_PPM, b"P3\n1 1\n255\n\0\0\0").contains("no P6 magic"));
        assert!(msg(MIME_PPM, b"P6\n1 1\n65535\n\0\0\0").contains("maxval 65535"));
        assert!(msg(MIME_PPM, b"P6\n0 1\n255\n").contains("0x1 pixels"));
        assert!(msg(MIME_PPM, b"P6\n100000 100000\n255\n").contains("at most"));
        assert!(msg(MIME_PPM, b"P6\n2 2\n255\n\0\0\0").contains("3 pixel bytes, 12 expected"));
        assert!(msg(MIME_PPM, b"P6\n2 x\n255\n").contains("\"x\" is not a number"));
        assert!(msg(MIME_PPM, b"P6\n2").contains("ends early"));
        assert!(msg(MIME_PPM, b"P6 99999999999999999999 1 255\n").contains("longer than 12"));
        assert!(msg(MIME_PPM, b"P6 99999999999 99999999999 255\n").contains("at most"));
        assert!(msg(MIME_PNG, b"\x89PNG\r\n\x1a\nxx").contains("not a valid PNG"));
        assert_eq!(
            msg("image/bmp", b""),
            "the screen dump is \"image/bmp\", neither image/png nor image/x-portable-pixmap"
        );
    }
}
