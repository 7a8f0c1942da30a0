//! Tokenizer shared by the srepr and infix parsers. It never panics: every byte is either
//! part of a token or an error naming its offset.

use super::{sym_err, MAX_LEN};
use crate::error::Result;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    /// Decimal digits of an integer literal (sign handled by the parsers).
    Int(String),
    Float(f64),
    Str(String),
    Punct(&'static str),
}

/// Multi-character punctuation first so the longest match wins.
const PUNCT: &[&str] = &[
    "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "(", ")", "[", "]", ",", "=", ".", "+", "-",
    "*", "/", "%", "<", ">", "&", "|", "^", "~",
];

/// A token and the byte offset where it starts (for error messages).
pub(crate) type Spanned = (Tok, usize);

pub(crate) fn lex(src: &str) -> Result<Vec<Spanned>> {
    if src.len() > MAX_LEN {
        return Err(sym_err(format!(
            "expression is {} bytes long, the limit is {MAX_LEN}",
            src.len()
        )));
    }
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(src[start..i].to_string()), start));
        } else if c.is_ascii_digit()
            || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            i = number(src, i, &mut out)?;
        } else if c == b'\'' || c == b'"' {
            i = string(src, i, &mut out)?;
        } else if let Some(p) = PUNCT.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
            out.push((Tok::Punct(p), start));
            i += p.len();
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(sym_err(format!("unexpected character {ch:?} at byte {i}")));
        }
    }
    Ok(out)
}

fn number(src: &str, start: usize, out: &mut Vec<Spanned>) -> Result<usize> {
    let b = src.as_bytes();
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let mut is_float = false;
    if i < b.len() && b[i] == b'.' && b.get(i + 1).is_none_or(|d| d.is_ascii_digit()) {
        is_float = true;
        i = digits(i + 1);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            is_float = true;
            i = digits(j);
        }
    }
    let text = &src[start..i];
    if is_float {
        let v: f64 = text
            .parse()
            .map_err(|_| sym_err(format!("bad float literal '{text}' at byte {start}")))?;
        out.push((Tok::Float(v), start));
    } else {
        out.push((Tok::Int(text.to_string()), start));
    }
    Ok(i)
}

fn string(src: &str, start: usize, out: &mut Vec<Spanned>) -> Result<usize> {
    let quote = src.as_bytes()[start] as char;
    let mut s = String::new();
    let mut chars = src[start + 1..].char_indices();
    while let Some((off, ch)) = chars.next() {
        match ch {
            '\\' => match chars.next() {
                Some((_, e)) => s.push(e),
                None => break,
            },
            c if c == quote => {
                out.push((Tok::Str(s), start));
                return Ok(start + 1 + off + 1);
            }
            c => s.push(c),
        }
    }
    Err(sym_err(format!(
        "unterminated string starting at byte {start}"
    )))
}

/// Parse an integer literal, with an optional leading minus so `-9223372036854775808` fits.
pub(crate) fn int_literal(digits: &str, negative: bool) -> Result<i64> {
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    text.parse::<i64>().map_err(|_| {
        sym_err(format!(
            "integer literal {text} does not fit in 64 bits (sizes are evaluated in int64)"
        ))
    })
}

/// Cursor over a token list, used by both parsers.
pub(crate) struct Cursor {
    toks: Vec<Spanned>,
    pos: usize,
    src_len: usize,
}

impl Cursor {
    pub(crate) fn new(src: &str) -> Result<Cursor> {
        Ok(Cursor {
            toks: lex(src)?,
            pos: 0,
            src_len: src.len(),
        })
    }

    pub(crate) fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    pub(crate) fn peek_at(&self, ahead: usize) -> Option<&Tok> {
        self.toks.get(self.pos + ahead).map(|(t, _)| t)
    }

    pub(crate) fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(t, _)| t.clone());
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// Step back over the token just taken (to report it in an error).
    pub(crate) fn pos_back(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// Byte offset of the next token (or the end), for error messages.
    pub(crate) fn offset(&self) -> usize {
        self.toks.get(self.pos).map_or(self.src_len, |(_, o)| *o)
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub(crate) fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    pub(crate) fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.is_punct(p);
        if hit {
            self.pos += 1;
        }
        hit
    }

    pub(crate) fn expect_punct(&mut self, p: &str) -> Result<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{p}'")))
        }
    }

    pub(crate) fn unexpected(&self, wanted: &str) -> crate::error::Error {
        match self.peek() {
            None => sym_err(format!("unexpected end of expression, expected {wanted}")),
            Some(t) => sym_err(format!(
                "unexpected {} at byte {}, expected {wanted}",
                describe(t),
                self.offset()
            )),
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("name '{s}'"),
        Tok::Int(s) => format!("number {s}"),
        Tok::Float(f) => format!("number {f}"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Punct(p) => format!("'{p}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        let t: Vec<Tok> = lex("Symbol('s0', x=1.5e3) // 2**-3 L[\"a\\\"b\"]")
            .unwrap()
            .into_iter()
            .map(|(t, _)| t)
            .collect();
        assert_eq!(t[0], Tok::Ident("Symbol".into()));
        assert_eq!(t[2], Tok::Str("s0".into()));
        assert_eq!(t[6], Tok::Float(1500.0));
        assert_eq!(t[8], Tok::Punct("//"));
        assert_eq!(t[10], Tok::Punct("**"));
        assert_eq!(t[15], Tok::Str("a\"b".into()));
        assert!(lex("'open").is_err());
        assert!(lex("a $ b").is_err());
        assert!(lex("é").is_err());
        assert_eq!(int_literal("9223372036854775808", true).unwrap(), i64::MIN);
        assert!(int_literal("9223372036854775808", false).is_err());
    }
}
