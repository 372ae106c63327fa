//! The corpus files in `tests/corpus/`: named byte strings with an expectation, written in a
//! small text syntax (see `tests/corpus/tcp.txt`).

use std::path::{Path, PathBuf};

/// One case of a corpus file.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub expect: String,
    pub bytes: Vec<u8>,
}

pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// The cases of `tests/corpus/NAME`.
pub fn load(name: &str) -> Vec<Case> {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(n, l)| {
            let parts: Vec<&str> = l.splitn(3, '|').map(str::trim).collect();
            let [name, expect, bytes] = parts[..] else {
                panic!("{name}:{}: expected `name | expectation | bytes`", n + 1);
            };
            Case {
                name: name.to_string(),
                expect: expect.to_string(),
                bytes: bytes_of(bytes).unwrap_or_else(|e| panic!("{name}:{}: {e}", n + 1)),
            }
        })
        .collect()
}

/// The bytes of a case: hex, "text", HELLO, each optionally followed by *N.
pub fn bytes_of(spec: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut chars = spec.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut token = Vec::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next().ok_or("unterminated string")? {
                    '"' => break,
                    '\\' => token.push(match chars.next().ok_or("dangling escape")? {
                        'r' => b'\r',
                        'n' => b'\n',
                        't' => b'\t',
                        '\\' => b'\\',
                        '"' => b'"',
                        other => return Err(format!("unknown escape \\{other}")),
                    }),
                    other => token.extend(other.to_string().as_bytes()),
                }
            }
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '*' || c == '"' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            if word == "HELLO" {
                token.extend(nowcast::wire::Hello::default().encode());
            } else {
                if word.len() % 2 != 0 {
                    return Err(format!("odd number of hex digits in {word}"));
                }
                for i in (0..word.len()).step_by(2) {
                    let byte = u8::from_str_radix(&word[i..i + 2], 16)
                        .map_err(|_| format!("not hex: {word}"))?;
                    token.push(byte);
                }
            }
        }
        let mut times = 1;
        if chars.peek() == Some(&'*') {
            chars.next();
            let mut n = String::new();
            while let Some(c) = chars.peek().filter(|c| c.is_ascii_digit()) {
                n.push(*c);
                chars.next();
            }
            times = n.parse().map_err(|_| format!("bad repeat count *{n}"))?;
        }
        for _ in 0..times {
            out.extend_from_slice(&token);
        }
    }
    Ok(out)
}
