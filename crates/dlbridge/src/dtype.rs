//! Element types: the DLPack `(code, bits, lanes)` triple, its names, and its spelling in the
//! buffer protocol and NumPy's array interface. One table serves every direction.

use std::ffi::CStr;
use std::fmt;

use crate::error::{Error, Result};
use crate::ffi::dlpack::DLDataType;

/// A DLPack type code (`DLDataTypeCode`), held as an integer so that codes from newer producers
/// can be carried and refused cleanly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeCode(pub u8);

impl TypeCode {
    /// `kDLInt`
    pub const INT: Self = Self(0);
    /// `kDLUInt`
    pub const UINT: Self = Self(1);
    /// `kDLFloat` (IEEE 754 binary formats)
    pub const FLOAT: Self = Self(2);
    /// `kDLOpaqueHandle` (testing only; refused)
    pub const OPAQUE_HANDLE: Self = Self(3);
    /// `kDLBfloat`
    pub const BFLOAT: Self = Self(4);
    /// `kDLComplex` (bits count both halves)
    pub const COMPLEX: Self = Self(5);
    /// `kDLBool`
    pub const BOOL: Self = Self(6);
    /// `kDLFloat8_e3m4`
    pub const FLOAT8_E3M4: Self = Self(7);
    /// `kDLFloat8_e4m3`
    pub const FLOAT8_E4M3: Self = Self(8);
    /// `kDLFloat8_e4m3b11fnuz`
    pub const FLOAT8_E4M3B11FNUZ: Self = Self(9);
    /// `kDLFloat8_e4m3fn`
    pub const FLOAT8_E4M3FN: Self = Self(10);
    /// `kDLFloat8_e4m3fnuz`
    pub const FLOAT8_E4M3FNUZ: Self = Self(11);
    /// `kDLFloat8_e5m2`
    pub const FLOAT8_E5M2: Self = Self(12);
    /// `kDLFloat8_e5m2fnuz`
    pub const FLOAT8_E5M2FNUZ: Self = Self(13);
    /// `kDLFloat8_e8m0fnu`
    pub const FLOAT8_E8M0FNU: Self = Self(14);
    /// `kDLFloat6_e2m3fn`
    pub const FLOAT6_E2M3FN: Self = Self(15);
    /// `kDLFloat6_e3m2fn`
    pub const FLOAT6_E3M2FN: Self = Self(16);
    /// `kDLFloat4_e2m1fn`
    pub const FLOAT4_E2M1FN: Self = Self(17);
    /// `kDLBcomplex`: a complex number of two bfloat16 halves (bits count both), laid out as
    /// `kDLComplex` is. Added to the header after DLPack 1.3, with the minor version still 3.
    pub const BCOMPLEX: Self = Self(18);
}

/// An element type: DLPack code, bits per lane and lanes. Only valid combinations can be built
/// (see [`DType::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DType {
    code: TypeCode,
    bits: u8,
    lanes: u16,
}

/// One row of the dtype table.
struct Entry {
    name: &'static str,
    code: TypeCode,
    bits: u8,
    /// Buffer-protocol format (native byte order), if the struct module has one.
    format: Option<&'static CStr>,
    /// NumPy typestr kind letter, if NumPy has the type natively.
    kind: Option<char>,
    /// The DLPack minor version (of major 1) that introduced the code.
    since_minor: u32,
}

const fn e(
    name: &'static str,
    code: TypeCode,
    bits: u8,
    format: Option<&'static CStr>,
    kind: Option<char>,
    since_minor: u32,
) -> Entry {
    Entry {
        name,
        code,
        bits,
        format,
        kind,
        since_minor,
    }
}

#[rustfmt::skip]
static TABLE: &[Entry] = &[
    e("bool", TypeCode::BOOL, 8, Some(c"?"), Some('b'), 0),
    e("int8", TypeCode::INT, 8, Some(c"b"), Some('i'), 0),
    e("int16", TypeCode::INT, 16, Some(c"h"), Some('i'), 0),
    e("int32", TypeCode::INT, 32, Some(c"i"), Some('i'), 0),
    e("int64", TypeCode::INT, 64, Some(c"q"), Some('i'), 0),
    e("uint8", TypeCode::UINT, 8, Some(c"B"), Some('u'), 0),
    e("uint16", TypeCode::UINT, 16, Some(c"H"), Some('u'), 0),
    e("uint32", TypeCode::UINT, 32, Some(c"I"), Some('u'), 0),
    e("uint64", TypeCode::UINT, 64, Some(c"Q"), Some('u'), 0),
    e("float16", TypeCode::FLOAT, 16, Some(c"e"), Some('f'), 0),
    e("float32", TypeCode::FLOAT, 32, Some(c"f"), Some('f'), 0),
    e("float64", TypeCode::FLOAT, 64, Some(c"d"), Some('f'), 0),
    e("bfloat16", TypeCode::BFLOAT, 16, None, None, 0),
    e("complex64", TypeCode::COMPLEX, 64, Some(c"Zf"), Some('c'), 0),
    e("complex128", TypeCode::COMPLEX, 128, Some(c"Zd"), Some('c'), 0),
    e("float8_e3m4", TypeCode::FLOAT8_E3M4, 8, None, None, 1),
    e("float8_e4m3", TypeCode::FLOAT8_E4M3, 8, None, None, 1),
    e("float8_e4m3b11fnuz", TypeCode::FLOAT8_E4M3B11FNUZ, 8, None, None, 1),
    e("float8_e4m3fn", TypeCode::FLOAT8_E4M3FN, 8, None, None, 1),
    e("float8_e4m3fnuz", TypeCode::FLOAT8_E4M3FNUZ, 8, None, None, 1),
    e("float8_e5m2", TypeCode::FLOAT8_E5M2, 8, None, None, 1),
    e("float8_e5m2fnuz", TypeCode::FLOAT8_E5M2FNUZ, 8, None, None, 1),
    e("float8_e8m0fnu", TypeCode::FLOAT8_E8M0FNU, 8, None, None, 1),
    e("float6_e2m3fn", TypeCode::FLOAT6_E2M3FN, 6, None, None, 1),
    e("float6_e3m2fn", TypeCode::FLOAT6_E3M2FN, 6, None, None, 1),
    e("float4_e2m1fn", TypeCode::FLOAT4_E2M1FN, 4, None, None, 1),
    // The header that added it still says DLPack 1.3: a 1.3 consumer may be sent it.
    e("bcomplex32", TypeCode::BCOMPLEX, 32, None, None, 3),
];

fn entry(code: TypeCode, bits: u8) -> Option<&'static Entry> {
    index(code, bits).map(|i| &TABLE[i])
}

/// The row of `(code, bits)` in [`TABLE`], computed rather than searched (exports and imports
/// look dtypes up on every call); a unit test keeps it equal to a search of the table.
fn index(code: TypeCode, bits: u8) -> Option<usize> {
    let width = |b: u8| match b {
        8 => 0,
        16 => 1,
        32 => 2,
        _ => 3,
    };
    match (code.0, bits) {
        (6, 8) => Some(0),
        (0, 8 | 16 | 32 | 64) => Some(1 + width(bits)),
        (1, 8 | 16 | 32 | 64) => Some(5 + width(bits)),
        (2, 16 | 32 | 64) => Some(8 + width(bits)),
        (4, 16) => Some(12),
        (5, 64) => Some(13),
        (5, 128) => Some(14),
        (c @ 7..=14, 8) => Some(15 + usize::from(c - 7)),
        (c @ 15..=16, 6) => Some(23 + usize::from(c - 15)),
        (17, 4) => Some(25),
        (18, 32) => Some(26),
        _ => None,
    }
}

impl DType {
    /// `bool` (one byte per element).
    pub const BOOL: Self = Self::scalar(TypeCode::BOOL, 8);
    /// `int8`
    pub const INT8: Self = Self::scalar(TypeCode::INT, 8);
    /// `int16`
    pub const INT16: Self = Self::scalar(TypeCode::INT, 16);
    /// `int32`
    pub const INT32: Self = Self::scalar(TypeCode::INT, 32);
    /// `int64`
    pub const INT64: Self = Self::scalar(TypeCode::INT, 64);
    /// `uint8`
    pub const UINT8: Self = Self::scalar(TypeCode::UINT, 8);
    /// `uint16`
    pub const UINT16: Self = Self::scalar(TypeCode::UINT, 16);
    /// `uint32`
    pub const UINT32: Self = Self::scalar(TypeCode::UINT, 32);
    /// `uint64`
    pub const UINT64: Self = Self::scalar(TypeCode::UINT, 64);
    /// `float16`
    pub const FLOAT16: Self = Self::scalar(TypeCode::FLOAT, 16);
    /// `float32`
    pub const FLOAT32: Self = Self::scalar(TypeCode::FLOAT, 32);
    /// `float64`
    pub const FLOAT64: Self = Self::scalar(TypeCode::FLOAT, 64);
    /// `bfloat16`
    pub const BFLOAT16: Self = Self::scalar(TypeCode::BFLOAT, 16);
    /// `complex64`
    pub const COMPLEX64: Self = Self::scalar(TypeCode::COMPLEX, 64);
    /// `complex128`
    pub const COMPLEX128: Self = Self::scalar(TypeCode::COMPLEX, 128);

    const fn scalar(code: TypeCode, bits: u8) -> Self {
        Self {
            code,
            bits,
            lanes: 1,
        }
    }

    /// A validated dtype: the code must be known, `bits` valid for it and `lanes >= 1`.
    /// Unknown or invalid combinations are a [`Error::UnsupportedDType`] (BufferError).
    pub fn new(code: TypeCode, bits: u8, lanes: u16) -> Result<Self> {
        if lanes != 0 && index(code, bits).is_some() {
            Ok(Self { code, bits, lanes })
        } else {
            Err(Self::refusal(code, bits, lanes))
        }
    }

    /// Why `(code, bits, lanes)` is not a dtype (out of line: only bad input gets here).
    #[cold]
    #[inline(never)]
    fn refusal(code: TypeCode, bits: u8, lanes: u16) -> Error {
        let reason = if code == TypeCode::OPAQUE_HANDLE {
            "kDLOpaqueHandle has no defined element layout"
        } else if lanes == 0 {
            "lanes must be at least 1"
        } else if TABLE.iter().any(|e| e.code == code) {
            "this bit width is not valid for the type code"
        } else {
            "unknown type code (from a newer DLPack?)"
        };
        Error::UnsupportedDType {
            code: code.0,
            bits,
            lanes,
            reason: reason.to_owned(),
        }
    }

    /// Validate a raw `DLDataType`.
    pub fn from_dl(dt: DLDataType) -> Result<Self> {
        Self::new(TypeCode(dt.code), dt.bits, dt.lanes)
    }

    /// The raw `DLDataType`.
    pub fn to_dl(self) -> DLDataType {
        DLDataType {
            code: self.code.0,
            bits: self.bits,
            lanes: self.lanes,
        }
    }

    /// Look a dtype up by its NumPy / ml_dtypes name (`"float32"`, `"bfloat16"`, ...), or by
    /// the name [`DType::name`] gives a vector type (`"float32x4"`: four lanes).
    pub fn from_name(name: &str) -> Option<Self> {
        let scalar = |base: &str| {
            TABLE
                .iter()
                .find(|e| e.name == base)
                .map(|e| Self::scalar(e.code, e.bits))
        };
        if let Some(dtype) = scalar(name) {
            return Some(dtype);
        }
        let (base, lanes) = name.rsplit_once('x')?;
        let count: u16 = lanes.parse().ok().filter(|&n| n > 1)?;
        if count.to_string() != lanes {
            return None; // "float32x04" is not a name `name` gives
        }
        let dtype = scalar(base)?;
        Self::new(dtype.code, dtype.bits, count).ok()
    }

    fn entry(self) -> &'static Entry {
        entry(self.code, self.bits).expect("a DType is only built from a table entry")
    }

    /// The type code.
    pub fn code(self) -> TypeCode {
        self.code
    }
    /// Bits per lane.
    pub fn bits(self) -> u8 {
        self.bits
    }
    /// Number of lanes.
    pub fn lanes(self) -> u16 {
        self.lanes
    }
    /// True for the packed sub-byte types (float6, float4).
    pub fn is_subbyte(self) -> bool {
        self.bits < 8
    }

    /// Bytes per element, `ceil(bits * lanes / 8)` (the header's formula; for packed sub-byte
    /// types use [`DType::packed_nbytes`] for whole buffers).
    pub fn itemsize(self) -> usize {
        (usize::from(self.bits) * usize::from(self.lanes)).div_ceil(8)
    }

    /// Bytes occupied by `count` packed elements: `ceil(count * bits * lanes / 8)`.
    pub fn packed_nbytes(self, count: usize) -> Option<usize> {
        count
            .checked_mul(usize::from(self.bits) * usize::from(self.lanes))
            .map(|b| b.div_ceil(8))
    }

    /// The NumPy / ml_dtypes name; vector types get an `xN` suffix (`float32x4`).
    pub fn name(self) -> String {
        let base = self.entry().name;
        if self.lanes == 1 {
            base.to_owned()
        } else {
            format!("{base}x{}", self.lanes)
        }
    }

    /// The DLPack minor version (of major 1) a consumer must speak to receive this dtype.
    pub fn min_dlpack_minor(self) -> u32 {
        self.entry().since_minor
    }

    /// The buffer-protocol format string (native byte order), if the struct module has one.
    pub fn buffer_format(self) -> Option<&'static str> {
        self.buffer_format_cstr()
            .map(|f| f.to_str().expect("formats are ASCII"))
    }

    /// [`DType::buffer_format`] as a static C string (for `Py_buffer.format`).
    pub fn buffer_format_cstr(self) -> Option<&'static CStr> {
        if self.lanes != 1 {
            return None;
        }
        self.entry().format
    }

    /// The NumPy array-interface typestr (`"<f4"`, `"|b1"`), if NumPy has this type natively.
    pub fn typestr(self) -> Option<String> {
        if self.lanes != 1 {
            return None;
        }
        let kind = self.entry().kind?;
        let size = self.itemsize();
        let order = if size == 1 { '|' } else { NATIVE_ORDER };
        Some(format!("{order}{kind}{size}"))
    }

    /// Parse a buffer-protocol (struct module) format for one element.
    /// `itemsize` is the exporter's item size, checked against the format.
    pub fn from_buffer_format(format: &str, itemsize: usize) -> Result<Self> {
        let bad = |why: &str| Error::UnsupportedFormat {
            format: format.to_owned(),
            reason: why.to_owned(),
        };
        let (native_sizes, rest) = match format.as_bytes().first() {
            Some(b'@') => (true, &format[1..]),
            Some(b'=') => (false, &format[1..]),
            Some(b'<') if cfg!(target_endian = "little") => (false, &format[1..]),
            Some(b'>') | Some(b'!') if cfg!(target_endian = "little") => {
                return Err(Error::NonNativeByteOrder {
                    what: format!("buffer format {format:?}"),
                });
            }
            Some(b'>') | Some(b'!') => (false, &format[1..]),
            Some(b'<') => {
                return Err(Error::NonNativeByteOrder {
                    what: format!("buffer format {format:?}"),
                });
            }
            _ => (true, format),
        };
        let long = if native_sizes {
            std::mem::size_of::<std::ffi::c_long>() as u8
        } else {
            4
        };
        let dtype = match rest {
            "?" => DType::BOOL,
            "b" => DType::INT8,
            "B" => DType::UINT8,
            "h" => DType::INT16,
            "H" => DType::UINT16,
            "i" => DType::INT32,
            "I" => DType::UINT32,
            "l" => DType::scalar(TypeCode::INT, long * 8),
            "L" => DType::scalar(TypeCode::UINT, long * 8),
            "q" => DType::INT64,
            "Q" => DType::UINT64,
            "n" if native_sizes => DType::scalar(TypeCode::INT, (usize::BITS) as u8),
            "N" if native_sizes => DType::scalar(TypeCode::UINT, (usize::BITS) as u8),
            "e" => DType::FLOAT16,
            "f" => DType::FLOAT32,
            "d" => DType::FLOAT64,
            "Zf" => DType::COMPLEX64,
            "Zd" => DType::COMPLEX128,
            "g" | "Zg" => return Err(bad("long double is not an IEEE interchange type")),
            _ => return Err(bad("no DLPack equivalent")),
        };
        if dtype.itemsize() != itemsize {
            return Err(bad(&format!(
                "item size {itemsize} does not match the format"
            )));
        }
        Ok(dtype)
    }

    /// Parse a NumPy array-interface typestr such as `"<f4"`, `"|u1"`, `"<c16"`.
    pub fn from_typestr(typestr: &str) -> Result<Self> {
        let bad = |why: &str| Error::UnsupportedFormat {
            format: typestr.to_owned(),
            reason: why.to_owned(),
        };
        let mut chars = typestr.chars();
        let (order, kind) = match (chars.next(), chars.next()) {
            (Some(o), Some(k)) => (o, k),
            _ => return Err(bad("too short")),
        };
        let size: usize = chars.as_str().parse().map_err(|_| bad("no item size"))?;
        let other_order = if NATIVE_ORDER == '<' { '>' } else { '<' };
        if order == other_order && size > 1 {
            return Err(Error::NonNativeByteOrder {
                what: format!("typestr {typestr:?}"),
            });
        }
        if !matches!(order, '<' | '>' | '|' | '=') {
            return Err(bad("unknown byte-order character"));
        }
        let code = match kind {
            'b' => TypeCode::BOOL,
            'i' => TypeCode::INT,
            'u' => TypeCode::UINT,
            'f' => TypeCode::FLOAT,
            'c' => TypeCode::COMPLEX,
            _ => return Err(bad("kind has no DLPack equivalent")),
        };
        let bits = size
            .checked_mul(8)
            .and_then(|b| u8::try_from(b).ok())
            .ok_or_else(|| bad("item size too large"))?;
        if kind == 'f' && size > 8 || kind == 'c' && size > 16 {
            return Err(bad("long double is not an IEEE interchange type"));
        }
        Self::new(code, bits, 1).map_err(|_| bad("unsupported item size"))
    }
}

const NATIVE_ORDER: char = if cfg!(target_endian = "little") {
    '<'
} else {
    '>'
};

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Every dtype of the table (scalar, lanes = 1).
#[cfg(test)]
pub(crate) fn all_dtypes() -> impl Iterator<Item = DType> {
    TABLE.iter().map(|e| DType::scalar(e.code, e.bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dt in all_dtypes() {
            assert_eq!(DType::from_name(&dt.name()), Some(dt));
            let vector = DType::new(dt.code(), dt.bits(), 4).unwrap();
            assert_eq!(vector.name(), format!("{}x4", dt.name()));
            assert_eq!(DType::from_name(&vector.name()), Some(vector));
        }
        assert_eq!(all_dtypes().count(), 27);
        for bad in [
            "float32x1",
            "float32x0",
            "float32x04",
            "float32x",
            "complex",
            "x4",
            "int3x2",
        ] {
            assert_eq!(DType::from_name(bad), None, "{bad}");
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "an exhaustive search of 10 496 (code, bits) pairs in code without unsafe: most of Miri's time"
    )]
    fn index_matches_the_table() {
        for code in 0..=40u8 {
            for bits in 0..=255u8 {
                let searched = TABLE
                    .iter()
                    .position(|e| e.code == TypeCode(code) && e.bits == bits);
                assert_eq!(
                    index(TypeCode(code), bits),
                    searched,
                    "code {code} bits {bits}"
                );
            }
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(DType::COMPLEX128.itemsize(), 16);
        assert_eq!(DType::BOOL.itemsize(), 1);
        let fp4 = DType::from_name("float4_e2m1fn").unwrap();
        assert_eq!(fp4.itemsize(), 1);
        assert_eq!(fp4.packed_nbytes(3), Some(2));
        let fp6 = DType::from_name("float6_e2m3fn").unwrap();
        assert_eq!(fp6.packed_nbytes(4), Some(3));
        let v = DType::new(TypeCode::FLOAT, 32, 4).unwrap();
        assert_eq!(v.itemsize(), 16);
        assert_eq!(v.name(), "float32x4");
        assert_eq!(v.buffer_format(), None);
    }

    #[test]
    fn invalid_combinations_are_refused() {
        assert!(DType::new(TypeCode::FLOAT, 8, 1).is_err());
        assert!(DType::new(TypeCode::FLOAT6_E2M3FN, 8, 1).is_err());
        assert!(DType::new(TypeCode::FLOAT4_E2M1FN, 8, 1).is_err());
        assert!(DType::new(TypeCode::BOOL, 1, 1).is_err());
        assert!(DType::new(TypeCode::BCOMPLEX, 16, 1).is_err());
        assert!(DType::new(TypeCode::BCOMPLEX, 64, 1).is_err());
        assert!(DType::new(TypeCode(19), 8, 1).is_err());
        assert!(DType::new(TypeCode::OPAQUE_HANDLE, 64, 1).is_err());
        assert!(DType::new(TypeCode::INT, 32, 0).is_err());
    }

    #[test]
    fn refusals_give_their_reason() {
        let reason = |code, bits, lanes| match DType::new(TypeCode(code), bits, lanes) {
            Err(Error::UnsupportedDType {
                code: c,
                bits: b,
                lanes: l,
                reason,
            }) if (c, b, l) == (code, bits, lanes) => reason,
            other => panic!("({code}, {bits}, {lanes}): {other:?}"),
        };
        assert_eq!(
            reason(3, 64, 1),
            "kDLOpaqueHandle has no defined element layout"
        );
        // The opaque handle is named first, then lanes, then the bit width.
        assert_eq!(
            reason(3, 64, 0),
            "kDLOpaqueHandle has no defined element layout"
        );
        assert_eq!(reason(2, 32, 0), "lanes must be at least 1");
        assert_eq!(reason(200, 8, 0), "lanes must be at least 1");
        assert_eq!(
            reason(2, 8, 1),
            "this bit width is not valid for the type code"
        );
        assert_eq!(
            reason(18, 8, 1),
            "this bit width is not valid for the type code"
        );
        assert_eq!(reason(19, 8, 1), "unknown type code (from a newer DLPack?)");
    }

    #[test]
    fn buffer_formats() {
        assert_eq!(DType::from_buffer_format("f", 4).unwrap(), DType::FLOAT32);
        assert_eq!(DType::from_buffer_format("<d", 8).unwrap(), DType::FLOAT64);
        assert_eq!(DType::from_buffer_format("=l", 4).unwrap(), DType::INT32);
        assert_eq!(
            DType::from_buffer_format("Zd", 16).unwrap(),
            DType::COMPLEX128
        );
        assert_eq!(DType::from_buffer_format("?", 1).unwrap(), DType::BOOL);
        assert!(matches!(
            DType::from_buffer_format(">i", 4),
            Err(Error::NonNativeByteOrder { .. })
        ));
        assert!(DType::from_buffer_format("g", 16).is_err());
        assert!(DType::from_buffer_format("f", 8).is_err());
        assert!(DType::from_buffer_format("3f", 12).is_err());
        for dt in all_dtypes() {
            if let Some(f) = dt.buffer_format() {
                assert_eq!(DType::from_buffer_format(f, dt.itemsize()).unwrap(), dt);
            }
        }
    }

    #[test]
    fn typestrs() {
        assert_eq!(DType::FLOAT32.typestr().as_deref(), Some("<f4"));
        assert_eq!(DType::BOOL.typestr().as_deref(), Some("|b1"));
        assert_eq!(DType::BFLOAT16.typestr(), None);
        assert!(DType::from_typestr(">f4").is_err());
        assert_eq!(DType::from_typestr(">u1").unwrap(), DType::UINT8);
        assert!(DType::from_typestr("<f16").is_err());
        assert!(DType::from_typestr("|O8").is_err());
        for dt in all_dtypes() {
            if let Some(t) = dt.typestr() {
                assert_eq!(DType::from_typestr(&t).unwrap(), dt);
            }
        }
    }

    #[test]
    fn versions() {
        assert_eq!(DType::FLOAT32.min_dlpack_minor(), 0);
        assert_eq!(
            DType::from_name("float8_e4m3fn")
                .unwrap()
                .min_dlpack_minor(),
            1
        );
        assert_eq!(
            DType::from_name("float8_e4m3fn").unwrap().code(),
            TypeCode(10)
        );
        let bcomplex = DType::from_name("bcomplex32").unwrap();
        assert_eq!((bcomplex.code(), bcomplex.bits()), (TypeCode(18), 32));
        assert_eq!(bcomplex.itemsize(), 4);
        assert_eq!(bcomplex.min_dlpack_minor(), 3);
        assert_eq!((bcomplex.buffer_format(), bcomplex.typestr()), (None, None));
    }
}
