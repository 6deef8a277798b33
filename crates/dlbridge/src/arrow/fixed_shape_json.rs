//! A direct reader for the common form of the `arrow.fixed_shape_tensor` JSON metadata.
//!
//! [`FixedShape::parse`] runs on every import of a fixed-shape tensor; a general JSON parser
//! builds a tree of maps, strings and vectors first, which costs more than the rest of the
//! import. This reader accepts a strict subset of JSON: one object whose keys are `shape`,
//! `permutation` and `dim_names` (each at most once, no escapes), non-negative integers
//! without sign, fraction or exponent, strings without escapes or control characters, `null`
//! for the optional keys, and JSON whitespace between tokens. It answers only when the input
//! is in that subset *and* describes valid parameters; anything else (including every error)
//! goes to the general parser, so results and error messages are those of the general one.

use crate::arrow::FixedShape;

/// The parameters in `json` when it is in the subset this reader accepts and they are valid;
/// `None` otherwise (the caller then uses the general parser).
pub(crate) fn parse(json: &[u8]) -> Option<FixedShape> {
    let mut reader = Reader { json, pos: 0 };
    let (mut shape, mut permutation, mut dim_names) = (None, None, None);
    reader.expect(b'{')?;
    loop {
        match reader.raw_string()? {
            b"shape" if shape.is_none() => {
                shape = Some(
                    reader
                        .after_colon()?
                        .array(|r| r.integer().and_then(|n| i64::try_from(n).ok()))?,
                );
            }
            b"permutation" if permutation.is_none() => {
                let value = reader
                    .after_colon()?
                    .nullable(|r| r.array(|r| r.integer().and_then(|n| usize::try_from(n).ok())))?;
                permutation = Some(value);
            }
            b"dim_names" if dim_names.is_none() => {
                let value = reader.after_colon()?.nullable(|r| {
                    r.array(|r| {
                        let name = std::str::from_utf8(r.raw_string()?).ok()?;
                        Some(name.to_owned())
                    })
                })?;
                dim_names = Some(value);
            }
            _ => return None,
        }
        if !reader.separator(b'}')? {
            break;
        }
    }
    reader.skip_whitespace();
    if reader.pos != json.len() {
        return None;
    }
    let shape: Vec<i64> = shape?;
    let ndim = shape.len();
    let permutation = permutation.flatten();
    if let Some(perm) = &permutation {
        // Up to 64 dimensions, one bit each marks the dimensions seen (more: the general path).
        if perm.len() != ndim || ndim > 64 {
            return None;
        }
        let mut seen = 0u64;
        for &i in perm {
            if i >= ndim || seen & 1 << i != 0 {
                return None;
            }
            seen |= 1 << i;
        }
    }
    let dim_names = dim_names.flatten();
    if dim_names.as_ref().is_some_and(|n| n.len() != ndim) {
        return None;
    }
    Some(FixedShape {
        shape,
        permutation,
        dim_names,
    })
}

/// A position in the JSON bytes.
struct Reader<'a> {
    json: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.json.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next token is the byte `b` (consumed).
    fn expect(&mut self, b: u8) -> Option<()> {
        self.skip_whitespace();
        (self.json.get(self.pos) == Some(&b)).then(|| self.pos += 1)
    }

    /// The `:` after a key.
    fn after_colon(&mut self) -> Option<&mut Self> {
        self.expect(b':')?;
        Some(self)
    }

    /// After an item: `true` for a `,` (another item follows), `false` for `close`.
    fn separator(&mut self, close: u8) -> Option<bool> {
        self.skip_whitespace();
        let b = *self.json.get(self.pos)?;
        self.pos += 1;
        match b {
            b',' => Some(true),
            _ if b == close => Some(false),
            _ => None,
        }
    }

    /// The bytes of a string without escapes or control characters (not checked to be UTF-8).
    fn raw_string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let rest = &self.json[self.pos..];
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.pos += len + 1;
        Some(&rest[..len])
    }

    /// A non-negative integer as JSON writes it (no leading zero, sign, fraction or exponent:
    /// a fraction or exponent stops the enclosing array at its `.`, `e` or `E`).
    fn integer(&mut self) -> Option<u64> {
        self.skip_whitespace();
        let rest = &self.json[self.pos..];
        let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 || len > 1 && rest[0] == b'0' {
            return None;
        }
        self.pos += len;
        rest[..len].iter().try_fold(0u64, |acc, &d| {
            acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
    }

    /// `null` (`Some(None)`) or what `value` reads.
    fn nullable<T>(&mut self, value: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        self.skip_whitespace();
        if self.json[self.pos..].starts_with(b"null") {
            self.pos += 4;
            return Some(None);
        }
        value(self).map(Some)
    }

    /// An array of items read by `item`.
    fn array<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.expect(b'[')?;
        let mut items = vec![];
        self.skip_whitespace();
        if self.json.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Some(items);
        }
        loop {
            items.push(item(self)?);
            if !self.separator(b']')? {
                return Some(items);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The general parser's answer when the input is valid (the reader must agree with it).
    fn general(json: &[u8]) -> Option<FixedShape> {
        FixedShape::parse_general(json).ok()
    }

    #[test]
    fn common_forms_are_read_directly_and_agree() {
        for json in [
            &br#"{"shape":[4,4]}"#[..],
            br#"{"shape":[100,200,500],"permutation":[2,0,1]}"#,
            br#"{"shape":[2,3],"dim_names":["H","W"]}"#,
            br#"{"shape":[2,3],"permutation":[1,0],"dim_names":["H","W"]}"#,
            br#" { "dim_names" : [ "C" , "H" ] , "shape" : [ 1 , 0 ] } "#,
            b"{\"shape\":[]}",
            b"{\"shape\":[9223372036854775807,2]}",
            b"{\"shape\":[3],\"permutation\":null,\"dim_names\":null}",
            b"{\n\t\"shape\":\r[5]}\n",
            "{\"shape\":[2],\"dim_names\":[\"\u{e9}t\u{e9}\"]}".as_bytes(),
        ] {
            let fast = parse(json);
            assert!(fast.is_some(), "{}", String::from_utf8_lossy(json));
            assert_eq!(fast, general(json), "{}", String::from_utf8_lossy(json));
        }
    }

    #[test]
    fn everything_else_goes_to_the_general_parser() {
        // Invalid JSON, invalid parameters, or forms outside the subset: no direct answer, so
        // the general parser's result (and error message) is the one returned.
        for json in [
            &b""[..],
            b"[1,2]",
            b"{}",
            b"{\"shape\":[2,-1]}",
            b"{\"shape\":[-0]}",
            b"{\"shape\":[2.0]}",
            b"{\"shape\":[2e1]}",
            b"{\"shape\":[02]}",
            b"{\"shape\":[2,]}",
            b"{\"shape\":[2],}",
            b"{\"shape\":[9223372036854775808]}",
            b"{\"shape\":[99999999999999999999999]}",
            b"{\"shape\":[2,2],\"permutation\":[0,0]}",
            b"{\"shape\":[2,2],\"permutation\":[0]}",
            b"{\"shape\":[2,2],\"permutation\":[0,2]}",
            b"{\"shape\":[2,2],\"dim_names\":[\"x\"]}",
            b"{\"shape\":[2],\"dim_names\":[\"a\\\"b\"]}",
            b"{\"shape\":[2],\"dim_names\":[\"a\x01\"]}",
            b"{\"shape\":[2],\"dim_names\":[\"\xff\"]}",
            b"{\"shape\":[2],\"shape\":[3]}",
            b"{\"sh\\u0061pe\":[2]}",
            b"{\"shape\":[2],\"extra\":1}",
            b"{\"permutation\":[0]}",
            b"{\"shape\":null}",
            b"{\"shape\":[2]} x",
            b"{\"shape\":[2]",
            b"\xef\xbb\xbf{\"shape\":[2]}",
            b"{\"shape\":[2],\"permutation\":nul}",
        ] {
            assert_eq!(parse(json), None, "{}", String::from_utf8_lossy(json));
        }
    }

    /// JSON-ish text built from the pieces the reader and the parsers care about.
    fn pieces() -> impl Strategy<Value = Vec<u8>> {
        let token = prop_oneof![
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just(",".to_owned()),
            Just(":".to_owned()),
            Just(" ".to_owned()),
            Just("\n".to_owned()),
            Just("null".to_owned()),
            Just("\"shape\"".to_owned()),
            Just("\"permutation\"".to_owned()),
            Just("\"dim_names\"".to_owned()),
            Just("\"x\"".to_owned()),
            Just("\"a\\n\"".to_owned()),
            Just("-".to_owned()),
            Just(".5".to_owned()),
            Just("e3".to_owned()),
            (0u64..5).prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            Just("0".to_owned()),
        ];
        prop::collection::vec(token, 0..24).prop_map(|t| t.concat().into_bytes())
    }

    /// Valid parameters written with varied spacing and key order.
    fn valid() -> impl Strategy<Value = Vec<u8>> {
        (1usize..5)
            .prop_flat_map(|ndim| {
                (
                    prop::collection::vec(0i64..7, ndim),
                    Just((0..ndim).collect::<Vec<usize>>()).prop_shuffle(),
                    any::<bool>(),
                    any::<bool>(),
                    any::<bool>(),
                    prop::sample::select(vec!["", " ", "\n\t"]),
                )
            })
            .prop_map(|(shape, perm, with_perm, with_names, names_first, ws)| {
                let list =
                    |items: Vec<String>| format!("[{ws}{}{ws}]", items.join(&format!("{ws},")));
                let mut entries = vec![format!(
                    "\"shape\"{ws}:{}",
                    list(shape.iter().map(i64::to_string).collect())
                )];
                if with_perm {
                    entries.push(format!(
                        "\"permutation\":{ws}{}",
                        list(perm.iter().map(usize::to_string).collect())
                    ));
                }
                if with_names {
                    let names = (0..shape.len()).map(|i| format!("\"d{i}\"")).collect();
                    let entry = format!("\"dim_names\":{}", list(names));
                    if names_first {
                        entries.insert(0, entry);
                    } else {
                        entries.push(entry);
                    }
                }
                format!("{ws}{{{}}}{ws}", entries.join(",")).into_bytes()
            })
    }

    proptest! {
        #[test]
        #[cfg_attr(
            miri,
            ignore = "serde_json against a parser without unsafe: most of Miri's time (the other property test here runs)"
        )]
        fn a_direct_answer_is_the_general_parsers(json in pieces()) {
            if let Some(fast) = parse(&json) {
                prop_assert_eq!(Some(fast), general(&json));
            }
        }

        #[test]
        fn mutated_valid_metadata_agrees(json in valid(), at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>()) {
            prop_assert!(parse(&json).is_some());
            prop_assert_eq!(parse(&json), general(&json));
            let mut mutated = json.clone();
            let i = at.index(mutated.len());
            if cut {
                mutated.truncate(i);
            } else {
                mutated[i] = byte;
            }
            if let Some(fast) = parse(&mutated) {
                prop_assert_eq!(Some(fast), general(&mutated));
            }
            // The public entry point gives the general answer either way.
            prop_assert_eq!(
                FixedShape::parse(&mutated).map_err(|e| e.to_string()),
                FixedShape::parse_general(&mutated).map_err(|e| e.to_string())
            );
        }
    }
}
