//! Shape and strides: the single place that decides whether a layout is sane.
//!
//! Strides are in elements (the DLPack convention). All arithmetic is checked: a layout is
//! accepted only if every element address it implies fits in `isize` bytes.

use crate::error::{Error, Result};

/// Most dimensions a layout may have (the buffer protocol's `PyBUF_MAX_NDIM`).
pub(crate) const MAX_NDIM: usize = 64;

/// Shape followed by strides; up to 2 dimensions live inline (no allocation). Kept small so a
/// `Tensor` moves cheaply: measured on imports from Python, 4 inline dimensions cost the 1-d and
/// 2-d imports more in moves than they save the 3-d and 4-d ones in allocation.
type Dims = crate::dims::Dims<4>;

/// A validated shape and strides (in elements). Strides are always present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    dims: Dims,
    size: usize,
}

/// The lowest (`<= 0`) and highest (`>= 0`) element offsets a layout reaches from its first
/// element; both 0 when it is empty. What [`Layout::min_offset`] and [`Layout::max_offset`]
/// return, known for free while validating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reach {
    pub lo: i64,
    pub hi: i64,
}

/// Row-major strides (in elements) for `shape`, or `None` on overflow. Dims of extent 0 are
/// treated like extent 1 so a zero-size `(0, 2048)` gets `(2048, 1)`.
pub(crate) fn c_strides(shape: &[i64]) -> Option<Vec<i64>> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.checked_mul(n.max(1))?;
    }
    Some(strides)
}

/// Column-major strides (in elements) for `shape`, or `None` on overflow.
pub(crate) fn f_strides(shape: &[i64]) -> Option<Vec<i64>> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (s, &n) in strides.iter_mut().zip(shape) {
        *s = acc;
        acc = acc.checked_mul(n.max(1))?;
    }
    Some(strides)
}

/// Running checks over the extents: no negative extent, and the dense strides must exist even
/// for zero-size layouts (copies and exports use them), so the product of the extents, zeros
/// counted as ones, must fit. The element count never exceeds that product. Failures are only
/// flagged here (no branch per dimension); [`extent_error`] says which.
struct Extents {
    dense: i64,
    size: i64,
    bad: bool,
}

impl Extents {
    const START: Self = Self {
        dense: 1,
        size: 1,
        bad: false,
    };

    /// Take the next extent.
    #[inline(always)]
    fn push(&mut self, n: i64) {
        let (dense, wrapped) = self.dense.overflowing_mul(n.max(1));
        self.dense = dense;
        self.size = self.size.wrapping_mul(n);
        self.bad |= wrapped | (n < 0);
    }

    /// The element count of `shape`, once each of its extents was pushed.
    #[inline(always)]
    fn size(&self, shape: &[i64]) -> Result<usize> {
        if self.bad {
            return Err(extent_error(shape));
        }
        usize::try_from(self.size).map_err(|_| shape_error(shape, "too large"))
    }
}

/// One pass over strided dimensions: writes extents and strides into a layout's storage and
/// sums `(extent - 1) * stride` per sign, with overflow flags rather than a branch per
/// dimension (they only matter when the layout is not empty: a zero extent makes any strides
/// harmless).
struct Strided {
    extents: Extents,
    lo: i64,
    hi: i64,
    wrapped: bool,
}

/// Which check a strided layout failed; [`Refusal::error`] builds the message.
enum Refusal {
    Extents,
    Size,
    Reach,
    Span,
}

impl Refusal {
    #[cold]
    #[inline(never)]
    fn error(self, shape: &[i64], strides: &[i64]) -> Error {
        match self {
            Refusal::Extents => extent_error(shape),
            Refusal::Size => shape_error(shape, "too large"),
            Refusal::Reach => reach_overflow(shape, strides),
            Refusal::Span => span_too_large(shape, strides),
        }
    }
}

impl Strided {
    #[inline(always)]
    fn walk(
        out_shape: &mut [i64],
        out_strides: &mut [i64],
        dims: impl Iterator<Item = (i64, i64)>,
    ) -> Self {
        let mut walk = Strided {
            extents: Extents::START,
            lo: 0,
            hi: 0,
            wrapped: false,
        };
        for ((out_n, out_s), (n, s)) in out_shape.iter_mut().zip(out_strides).zip(dims) {
            walk.extents.push(n);
            *out_n = n;
            *out_s = s;
            // (A negative `n` is flagged by `extents`; wrapping keeps it from panicking.)
            let (r, mul_wrapped) = n.wrapping_sub(1).overflowing_mul(s);
            let (l, lo_wrapped) = walk.lo.overflowing_add(r.min(0));
            let (h, hi_wrapped) = walk.hi.overflowing_add(r.max(0));
            (walk.lo, walk.hi) = (l, h);
            walk.wrapped |= mul_wrapped | lo_wrapped | hi_wrapped;
        }
        walk
    }

    /// The size and reach, or which check failed.
    #[inline(always)]
    fn finish(self, itemsize: usize) -> std::result::Result<(usize, Reach), Refusal> {
        if self.extents.bad {
            return Err(Refusal::Extents);
        }
        let size = usize::try_from(self.extents.size).map_err(|_| Refusal::Size)?;
        if size == 0 {
            return Ok((size, Reach { lo: 0, hi: 0 }));
        }
        if self.wrapped {
            return Err(Refusal::Reach);
        }
        let (lo, hi) = (self.lo, self.hi);
        // Every element address must fit: the span from the lowest to the highest reachable
        // element, in bytes, within isize::MAX.
        let span_bytes = hi
            .checked_sub(lo)
            .and_then(|d| d.checked_add(1))
            .and_then(|e| usize::try_from(e).ok())
            .and_then(|e| e.checked_mul(itemsize.max(1)))
            .filter(|b| *b <= isize::MAX as usize);
        if span_bytes.is_none() {
            return Err(Refusal::Span);
        }
        Ok((size, Reach { lo, hi }))
    }
}

impl Layout {
    /// Validate `shape` and `strides` (elements; `None` = C-contiguous) for elements of
    /// `itemsize` bytes.
    pub fn new(shape: &[i64], strides: Option<&[i64]>, itemsize: usize) -> Result<Self> {
        Self::with_reach(shape, strides, itemsize).map(|(layout, _)| layout)
    }

    /// [`Layout::new`], also returning the [`Reach`]. One pass over the dimensions checks the
    /// extents and strides, computes the size and reach, and writes shape and strides straight
    /// into the layout (no allocation up to 2 dimensions). Errors are built out of line.
    #[inline(always)]
    pub(crate) fn with_reach(
        shape: &[i64],
        strides: Option<&[i64]>,
        itemsize: usize,
    ) -> Result<(Self, Reach)> {
        let ndim = shape.len();
        if ndim > MAX_NDIM {
            return Err(too_many_dims(ndim));
        }
        if let Some(s) = strides.filter(|s| s.len() != ndim) {
            return Err(stride_count(s.len(), ndim));
        }
        let (dims, checked) = Dims::build(
            2 * ndim,
            #[inline(always)]
            |values| Self::fill(shape, strides, itemsize, values),
        );
        let (size, reach) = checked?;
        Ok((Self { dims, size }, reach))
    }

    /// The body of [`Layout::with_reach`]: check the dimensions, write shape then strides
    /// (copied, or computed when `strides` is `None`) into `values`, and return the size and
    /// reach.
    #[inline(always)]
    fn fill(
        shape: &[i64],
        strides: Option<&[i64]>,
        itemsize: usize,
        values: &mut [i64],
    ) -> Result<(usize, Reach)> {
        let (out_shape, out_strides) = values.split_at_mut(shape.len());
        let mut extents = Extents::START;
        Ok(match strides {
            None => {
                for (out, &n) in out_shape.iter_mut().zip(shape) {
                    extents.push(n);
                    *out = n;
                }
                let size = extents.size(shape)?;
                // Row-major strides; every partial product is below the dense product.
                let mut acc = 1i64;
                for (s, &n) in out_strides.iter_mut().zip(shape).rev() {
                    *s = acc;
                    acc *= n.max(1);
                }
                // C-contiguous: the elements span exactly `size` items.
                if size
                    .checked_mul(itemsize.max(1))
                    .is_none_or(|b| b > isize::MAX as usize)
                {
                    return Err(shape_error(shape, "spans more memory than can exist"));
                }
                let hi = size.saturating_sub(1) as i64;
                (size, Reach { lo: 0, hi })
            }
            Some(strides) => {
                let walk = Strided::walk(
                    out_shape,
                    out_strides,
                    shape.iter().copied().zip(strides.iter().copied()),
                );
                walk.finish(itemsize).map_err(|e| e.error(shape, strides))?
            }
        })
    }

    /// [`Layout::with_reach`] for a shape and strides in bytes as NumPy stores them: each
    /// stride is divided by `itemsize` (truncating, as C does) as it is written into the
    /// layout, which is then checked exactly as [`Layout::new`] checks it (NumPy's strides
    /// can be anything `as_strided` was given). One pass, no intermediate copy. `itemsize`
    /// must not be 0. (Only the NumPy lane of the Python import uses it.)
    #[cfg_attr(not(feature = "pyo3"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn from_byte_strides(
        shape: &[isize],
        byte_strides: &[isize],
        itemsize: usize,
    ) -> Result<(Self, Reach)> {
        let ndim = shape.len();
        if ndim > MAX_NDIM || byte_strides.len() != ndim {
            return Err(Self::byte_strides_error(shape, byte_strides, itemsize));
        }
        let item = itemsize as isize;
        let (dims, checked) = Dims::build(
            2 * ndim,
            #[inline(always)]
            |values| {
                let (out_shape, out_strides) = values.split_at_mut(ndim);
                let pairs = shape
                    .iter()
                    .zip(byte_strides)
                    .map(|(&n, &s)| (n as i64, (s / item) as i64));
                Strided::walk(out_shape, out_strides, pairs).finish(itemsize)
            },
        );
        match checked {
            Ok((size, reach)) => Ok((Self { dims, size }, reach)),
            Err(_) => Err(Self::byte_strides_error(shape, byte_strides, itemsize)),
        }
    }

    /// The error [`Layout::new`] gives for what [`Layout::from_byte_strides`] refused.
    #[cfg_attr(not(feature = "pyo3"), allow(dead_code))]
    #[cold]
    #[inline(never)]
    fn byte_strides_error(shape: &[isize], byte_strides: &[isize], itemsize: usize) -> Error {
        let shape: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
        let strides: Vec<i64> = byte_strides
            .iter()
            .map(|&s| (s / itemsize as isize) as i64)
            .collect();
        match Self::new(&shape, Some(&strides), itemsize) {
            Err(e) => e,
            Ok(_) => unreachable!("from_byte_strides refuses only what Layout::new refuses"),
        }
    }

    /// A C-contiguous layout for `shape`.
    pub fn contiguous(shape: &[i64], itemsize: usize) -> Result<Self> {
        Self::new(shape, None, itemsize)
    }

    /// A C-contiguous layout for a shape of `usize` extents, as Rust code writes them: an
    /// extent past `i64::MAX` (DLPack's type) is an invalid layout.
    pub(crate) fn contiguous_usize(shape: &[usize], itemsize: usize) -> Result<Self> {
        let shape = shape
            .iter()
            .map(|&n| i64::try_from(n))
            .collect::<Result<Vec<i64>, _>>()
            .map_err(|_| {
                Error::InvalidLayout(format!("an extent of shape {shape:?} exceeds i64"))
            })?;
        Self::contiguous(&shape, itemsize)
    }

    /// Extents.
    pub fn shape(&self) -> &[i64] {
        &self.dims.as_slice()[..self.ndim()]
    }
    /// Strides in elements.
    pub fn strides(&self) -> &[i64] {
        &self.dims.as_slice()[self.ndim()..]
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.dims.as_slice().len() / 2
    }
    /// Number of elements.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Lowest element offset reachable from the first element (`<= 0`; 0 when empty).
    pub fn min_offset(&self) -> i64 {
        self.reaches().filter(|r| *r < 0).sum()
    }
    /// Highest element offset reachable from the first element (`>= 0`; 0 when empty).
    pub fn max_offset(&self) -> i64 {
        self.reaches().filter(|r| *r > 0).sum()
    }

    /// Both extreme offsets (see [`Reach`]).
    pub(crate) fn reach(&self) -> Reach {
        Reach {
            lo: self.min_offset(),
            hi: self.max_offset(),
        }
    }

    /// `(extent - 1) * stride` per dimension (nothing when empty); validated not to overflow.
    fn reaches(&self) -> impl Iterator<Item = i64> + '_ {
        let empty = self.size == 0;
        self.shape()
            .iter()
            .zip(self.strides())
            .filter(move |_| !empty)
            .map(|(&n, &s)| (n - 1) * s)
    }

    /// Row-major dense. Dimensions of extent 1 are ignored; a zero-size layout is contiguous.
    pub fn is_c_contiguous(&self) -> bool {
        self.size == 0 || dense(self.shape().iter().zip(self.strides()).rev())
    }

    /// Column-major dense. Dimensions of extent 1 are ignored; a zero-size layout is contiguous.
    pub fn is_f_contiguous(&self) -> bool {
        self.size == 0 || dense(self.shape().iter().zip(self.strides()))
    }

    /// True when no two indices reach the same element (what a mutable view needs). Checked
    /// conservatively: with dimensions of extent > 1 sorted by `|stride|`, each stride must step
    /// past everything the smaller ones reach. Zero-size layouts reach nothing and pass.
    pub fn elements_are_distinct(&self) -> bool {
        if self.size == 0 {
            return true;
        }
        let mut dims: Vec<(u64, u64)> = self
            .shape()
            .iter()
            .zip(self.strides())
            .filter(|&(&n, _)| n > 1)
            .map(|(&n, &s)| (s.unsigned_abs(), n as u64))
            .collect();
        dims.sort_unstable();
        let mut reach: u64 = 0;
        for (stride, extent) in dims {
            if stride <= reach {
                return false;
            }
            // Validated layouts keep `(extent - 1) * stride` within i64.
            reach += (extent - 1) * stride;
        }
        true
    }

    /// The strides to publish: the real ones, except for zero-size layouts whose strides are
    /// meaningless and are published row-major (`(0, 2048)` gets `(2048, 1)`).
    pub fn export_strides(&self) -> std::borrow::Cow<'_, [i64]> {
        if self.size == 0 {
            c_strides(self.shape())
                .expect("validated shapes do not overflow")
                .into()
        } else {
            self.strides().into()
        }
    }
}

/// Every byte the layout reaches (`reach`, in elements of `itemsize` bytes, as validated by
/// [`Layout::with_reach`]) from `base + byte_offset` must be a real address.
pub(crate) fn check_address_range(
    base: usize,
    byte_offset: u64,
    reach: Reach,
    itemsize: usize,
) -> Result<()> {
    // The layout bounded the byte span by isize::MAX, so these products cannot overflow.
    let below = reach.lo.unsigned_abs() as usize * itemsize;
    let above = (reach.hi as usize + 1) * itemsize;
    let fits = usize::try_from(byte_offset)
        .ok()
        .and_then(|o| base.checked_add(o))
        .filter(|first| *first >= below)
        .and_then(|first| first.checked_add(above))
        .is_some_and(|end| end <= isize::MAX as usize);
    if fits {
        Ok(())
    } else {
        Err(address_overflow())
    }
}

#[cold]
#[inline(never)]
fn address_overflow() -> Error {
    Error::InvalidLayout("data pointer plus offsets overflows the address space".to_owned())
}

/// Call `f` with the element offset of every element of `layout`, in row-major index order.
pub(crate) fn for_each_offset(layout: &Layout, mut f: impl FnMut(i64)) {
    if layout.size() == 0 {
        return;
    }
    let shape = layout.shape();
    let strides = layout.strides();
    let ndim = shape.len();
    let mut index = vec![0i64; ndim];
    let mut offset = 0i64;
    loop {
        f(offset);
        let mut d = ndim;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            // Step only within the extent, so no offset outside the validated span is formed.
            if index[d] + 1 < shape[d] {
                index[d] += 1;
                offset += strides[d];
                break;
            }
            offset -= strides[d] * index[d];
            index[d] = 0;
        }
    }
}

#[cold]
#[inline(never)]
fn too_many_dims(ndim: usize) -> Error {
    Error::InvalidLayout(format!("ndim {ndim} exceeds the maximum of {MAX_NDIM}"))
}

#[cold]
#[inline(never)]
fn stride_count(strides: usize, ndim: usize) -> Error {
    Error::InvalidLayout(format!("{strides} strides for {ndim} dimensions"))
}

/// The first extent, in order, that is negative or makes the dense product overflow (the fast
/// path only knows that one did).
#[cold]
#[inline(never)]
fn extent_error(shape: &[i64]) -> Error {
    let mut dense = 1i64;
    for (i, &n) in shape.iter().enumerate() {
        if n < 0 {
            return Error::InvalidLayout(format!(
                "negative extent {n} in dimension {i} of shape {shape:?}"
            ));
        }
        match dense.checked_mul(n.max(1)) {
            Some(d) => dense = d,
            None => return shape_error(shape, "overflows"),
        }
    }
    unreachable!("extent_error is only called after a bad extent")
}

/// `shape {shape:?} {what}`.
#[cold]
#[inline(never)]
fn shape_error(shape: &[i64], what: &str) -> Error {
    Error::InvalidLayout(format!("shape {shape:?} {what}"))
}

/// The first dimension, in order, whose reach or running sum overflows (the fast path only
/// knows that one did).
#[cold]
#[inline(never)]
fn reach_overflow(shape: &[i64], strides: &[i64]) -> Error {
    let (mut lo, mut hi) = (0i64, 0i64);
    for (&n, &s) in shape.iter().zip(strides) {
        let Some(reach) = (n - 1).checked_mul(s) else {
            return Error::InvalidLayout(format!("stride {s} with extent {n} overflows"));
        };
        let side = if reach < 0 { &mut lo } else { &mut hi };
        match side.checked_add(reach) {
            Some(sum) => *side = sum,
            None => return Error::InvalidLayout(format!("strides {strides:?} overflow")),
        }
    }
    unreachable!("reach_overflow is only called after an overflow")
}

#[cold]
#[inline(never)]
fn span_too_large(shape: &[i64], strides: &[i64]) -> Error {
    Error::InvalidLayout(format!(
        "shape {shape:?} with strides {strides:?} spans more memory than can exist"
    ))
}

fn dense<'a>(dims: impl Iterator<Item = (&'a i64, &'a i64)>) -> bool {
    let mut expected = 1i64;
    for (&n, &s) in dims {
        if n == 1 {
            continue;
        }
        if s != expected {
            return false;
        }
        expected *= n;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn contiguity_ignores_unit_dims() {
        // C4: (1,3,224,224) with strides (150528,50176,224,1)
        let l = Layout::new(&[1, 3, 224, 224], Some(&[150528, 50176, 224, 1]), 4).unwrap();
        assert!(l.is_c_contiguous());
        assert!(!l.is_f_contiguous());
        let l = Layout::new(&[3, 1, 6, 2], Some(&[12, 99, 2, 1]), 4).unwrap();
        assert!(l.is_c_contiguous());
        let l = Layout::new(&[4, 250], Some(&[1, 4]), 4).unwrap();
        assert!(l.is_f_contiguous() && !l.is_c_contiguous());
    }

    #[test]
    fn zero_size_and_scalars() {
        let l = Layout::new(&[0, 2048], Some(&[0, 2048]), 4).unwrap();
        assert_eq!(l.size(), 0);
        assert!(l.is_c_contiguous() && l.is_f_contiguous());
        assert_eq!(&*l.export_strides(), &[2048, 1]); // C10
        let s = Layout::new(&[], None, 8).unwrap();
        assert_eq!(s.size(), 1);
        assert!(s.is_c_contiguous());
    }

    #[test]
    fn negative_strides_span() {
        let l = Layout::new(&[3, 4], Some(&[4, -1]), 8).unwrap();
        assert_eq!((l.min_offset(), l.max_offset()), (-3, 8));
        assert!(!l.is_c_contiguous());
    }

    #[test]
    fn rejects_bad_layouts() {
        assert!(Layout::new(&[-1, 2], None, 4).is_err());
        assert!(Layout::new(&[2, 2], Some(&[1]), 4).is_err());
        assert!(Layout::new(&[i64::MAX, 2], None, 4).is_err());
        assert!(Layout::new(&[1 << 40, 1 << 40], Some(&[1, 1]), 4).is_err());
        assert!(Layout::new(&[2, 2], Some(&[i64::MAX, 1]), 1).is_err());
        assert!(Layout::new(&[1 << 62], None, 4).is_err());
        assert!(Layout::new(&[1; 65], None, 4).is_err());
        // A zero extent makes any strides harmless.
        assert!(Layout::new(&[0, 5], Some(&[i64::MAX, i64::MIN]), 4).is_ok());
    }

    /// The extreme offsets are reached by some element.
    fn offsets_hit_bounds(shape: &[i64], strides: &[i64], l: &Layout) -> bool {
        let lo: i64 = shape
            .iter()
            .zip(strides)
            .map(|(n, s)| ((n - 1) * s).min(0))
            .sum();
        let hi: i64 = shape
            .iter()
            .zip(strides)
            .map(|(n, s)| ((n - 1) * s).max(0))
            .sum();
        lo == l.min_offset() && hi == l.max_offset()
    }

    /// Shape, strides, size and reach of an accepted layout, or the message of the refusal.
    type Checked = std::result::Result<(Vec<i64>, Vec<i64>, usize, Reach), String>;

    /// Shape, strides (`None`: C-contiguous) and item size.
    type Case<'a> = (&'a [i64], Option<&'a [i64]>, usize);

    /// The straightforward validation `Layout::with_reach` replaced (several passes, errors
    /// built in place): shape, strides, size and reach, or the error message.
    fn reference(shape: &[i64], strides: Option<&[i64]>, itemsize: usize) -> Checked {
        if shape.len() > MAX_NDIM {
            return Err(format!(
                "ndim {} exceeds the maximum of {MAX_NDIM}",
                shape.len()
            ));
        }
        if let Some(s) = strides.filter(|s| s.len() != shape.len()) {
            return Err(format!(
                "{} strides for {} dimensions",
                s.len(),
                shape.len()
            ));
        }
        let mut dense: i64 = 1;
        let mut size: i64 = 1;
        for (i, &n) in shape.iter().enumerate() {
            if n < 0 {
                return Err(format!(
                    "negative extent {n} in dimension {i} of shape {shape:?}"
                ));
            }
            dense = dense
                .checked_mul(n.max(1))
                .ok_or_else(|| format!("shape {shape:?} overflows"))?;
            size *= n;
        }
        let size = usize::try_from(size).map_err(|_| format!("shape {shape:?} too large"))?;
        let strides = match strides {
            Some(s) => s.to_vec(),
            None => {
                if size
                    .checked_mul(itemsize.max(1))
                    .is_none_or(|b| b > isize::MAX as usize)
                {
                    return Err(format!("shape {shape:?} spans more memory than can exist"));
                }
                c_strides(shape).unwrap()
            }
        };
        let (mut lo, mut hi) = (0i64, 0i64);
        if size > 0 {
            for (&n, &s) in shape.iter().zip(&strides) {
                let reach = (n - 1)
                    .checked_mul(s)
                    .ok_or_else(|| format!("stride {s} with extent {n} overflows"))?;
                let side = if reach < 0 { &mut lo } else { &mut hi };
                *side = side
                    .checked_add(reach)
                    .ok_or_else(|| format!("strides {strides:?} overflow"))?;
            }
            let span_bytes = hi
                .checked_sub(lo)
                .and_then(|d| d.checked_add(1))
                .and_then(|e| usize::try_from(e).ok())
                .and_then(|e| e.checked_mul(itemsize.max(1)))
                .filter(|b| *b <= isize::MAX as usize);
            if span_bytes.is_none() {
                return Err(format!(
                    "shape {shape:?} with strides {strides:?} spans more memory than can exist"
                ));
            }
        }
        Ok((shape.to_vec(), strides, size, Reach { lo, hi }))
    }

    /// `Layout::with_reach` in the same terms as [`reference`].
    fn checked(shape: &[i64], strides: Option<&[i64]>, itemsize: usize) -> Checked {
        match Layout::with_reach(shape, strides, itemsize) {
            Ok((l, reach)) => {
                assert_eq!(reach, l.reach(), "the reach is what min/max_offset compute");
                Ok((l.shape().to_vec(), l.strides().to_vec(), l.size(), reach))
            }
            Err(Error::InvalidLayout(msg)) => Err(msg),
            Err(e) => panic!("not a layout error: {e:?}"),
        }
    }

    #[test]
    fn every_refusal_matches_the_reference() {
        // A constant, so that the arrays below are promoted to statics (Rust 1.87 does not
        // extend the lifetime of temporaries built from a local here).
        const M: i64 = i64::MAX;
        let cases: &[Case] = &[
            (&[1; 65], None, 4),
            (&[2, 2], Some(&[1]), 4),
            (&[2, -3], None, 4),
            (&[2, -3], Some(&[1, 1]), 4),
            (&[i64::MIN, 3], Some(&[1, 1]), 4),
            (&[1 << 40, 1 << 40], None, 4),
            // The overflow comes before the negative extent, and wins.
            (&[1 << 40, 1 << 40, -1], Some(&[1, 1, 1]), 4),
            (&[-1, 1 << 40, 1 << 40], Some(&[1, 1, 1]), 4),
            (&[0, 1 << 62, 4], Some(&[1, 1, 1]), 4),
            (&[1 << 62], None, 4),
            (&[2, 3], Some(&[M / 2 + 1, 1]), 4),
            (&[3, 3], Some(&[M / 2, M / 2]), 1),
            (&[3, 3], Some(&[-M / 2, -M / 2]), 1),
            (&[2, 2], Some(&[M, 1]), 1),
            (&[3, 3], Some(&[M / 2, -M / 2]), 1),
            (&[1 << 40, 1 << 20], Some(&[1, 1 << 40]), 16),
        ];
        for &(shape, strides, itemsize) in cases {
            let want = reference(shape, strides, itemsize);
            assert!(want.is_err(), "{shape:?} {strides:?}");
            assert_eq!(
                checked(shape, strides, itemsize),
                want,
                "{shape:?} {strides:?}"
            );
        }
    }

    #[test]
    fn byte_strides_refuse_too_many_dimensions() {
        let shape = vec![1isize; MAX_NDIM + 1];
        let err = Layout::from_byte_strides(&shape, &shape, 1).unwrap_err();
        let expected = Layout::new(&vec![1; MAX_NDIM + 1], Some(&vec![1; MAX_NDIM + 1]), 1);
        assert_eq!(err.to_string(), expected.unwrap_err().to_string());
    }

    #[test]
    fn inline_up_to_two_dimensions() {
        for ndim in 0..=6 {
            let shape = vec![2; ndim];
            let l = Layout::new(&shape, None, 4).unwrap();
            assert_eq!(matches!(l.dims, Dims::Inline(..)), ndim <= 2, "{ndim}");
            assert_eq!(l.strides(), c_strides(&shape).unwrap().as_slice());
        }
    }

    /// Extents and strides: mostly small, sometimes extreme.
    fn value() -> impl Strategy<Value = i64> {
        prop_oneof![
            6 => -3i64..8,
            1 => -(1i64 << 33)..(1i64 << 33),
            1 => prop::sample::select(vec![
                i64::MIN, i64::MIN + 1, -(1 << 62), 1 << 31, 1 << 62, i64::MAX / 2 + 1,
                i64::MAX - 1, i64::MAX,
            ]),
            1 => any::<i64>(),
        ]
    }

    proptest! {
        #[test]
        fn one_pass_matches_the_reference(
            dims in prop::collection::vec((value(), value()), 0..7),
            null_strides in any::<bool>(),
            extra_stride in any::<bool>(),
            itemsize in prop::sample::select(vec![0usize, 1, 2, 4, 8, 16, 1 << 20]),
        ) {
            let shape: Vec<i64> = dims.iter().map(|d| d.0).collect();
            let mut strides: Vec<i64> = dims.iter().map(|d| d.1).collect();
            if extra_stride {
                strides.push(1);
            }
            let strides = (!null_strides).then_some(strides.as_slice());
            prop_assert_eq!(
                checked(&shape, strides, itemsize),
                reference(&shape, strides, itemsize)
            );
        }

        #[test]
        fn byte_strides_match_layout_new(
            dims in prop::collection::vec((value(), value()), 0..7),
            itemsize in prop::sample::select(vec![1usize, 2, 4, 8, 16]),
            whole_items in any::<bool>(),
        ) {
            let shape: Vec<isize> = dims.iter().map(|d| d.0 as isize).collect();
            // Byte strides as NumPy stores them: usually whole items, sometimes not (which
            // truncates towards zero, as NumPy's own DLPack export does).
            let bytes: Vec<isize> = dims
                .iter()
                .map(|d| {
                    let s = d.1 as isize;
                    if whole_items { s.wrapping_mul(itemsize as isize) } else { s }
                })
                .collect();
            let shape_i64: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
            let strides: Vec<i64> = bytes.iter().map(|&s| (s / itemsize as isize) as i64).collect();
            let expected = Layout::with_reach(&shape_i64, Some(&strides), itemsize);
            let got = Layout::from_byte_strides(&shape, &bytes, itemsize);
            match (got, expected) {
                (Ok(g), Ok(e)) => prop_assert_eq!(g, e),
                (Err(g), Err(e)) => prop_assert_eq!(g.to_string(), e.to_string()),
                (g, e) => prop_assert!(false, "from_byte_strides {:?}, Layout::new {:?}", g, e),
            }
        }

        #[test]
        fn contiguous_layouts_are_contiguous(shape in prop::collection::vec(0i64..6, 0..5)) {
            let c = Layout::new(&shape, Some(&c_strides(&shape).unwrap()), 4).unwrap();
            prop_assert!(c.is_c_contiguous());
            let f = Layout::new(&shape, Some(&f_strides(&shape).unwrap()), 4).unwrap();
            prop_assert!(f.is_f_contiguous());
            let size: i64 = shape.iter().product();
            prop_assert_eq!(c.size() as i64, size);
            if size > 0 {
                prop_assert_eq!(c.max_offset() - c.min_offset() + 1, size);
            }
        }

        #[test]
        fn span_covers_every_element(
            dims in prop::collection::vec((1i64..5, -7i64..8), 0..4)
        ) {
            let shape: Vec<i64> = dims.iter().map(|d| d.0).collect();
            let strides: Vec<i64> = dims.iter().map(|d| d.1).collect();
            let l = Layout::new(&shape, Some(&strides), 2).unwrap();
            // Brute force over every element.
            let mut offsets = vec![];
            for_each_offset(&l, |o| offsets.push(o));
            prop_assert_eq!(offsets.len(), l.size());
            for off in offsets {
                prop_assert!(l.min_offset() <= off && off <= l.max_offset());
            }
            prop_assert!(l.size() == 0 || offsets_hit_bounds(&shape, &strides, &l));
        }

        #[test]
        fn walk_matches_brute_force(
            dims in prop::collection::vec((0i64..4, any::<i64>()), 0..4)
        ) {
            // The walker in row-major order against an odometer in i128, for any strides a
            // layout accepts (huge ones included: the walk must never step past the extent).
            let shape: Vec<i64> = dims.iter().map(|d| d.0).collect();
            let strides: Vec<i64> = dims.iter().map(|d| d.1 >> (d.1 as u8 % 64)).collect();
            let Ok(l) = Layout::new(&shape, Some(&strides), 1) else {
                return Ok(());
            };
            let mut walked = vec![];
            for_each_offset(&l, |o| walked.push(i128::from(o)));
            let mut expected: Vec<i128> = vec![];
            if l.size() > 0 {
                let mut index = vec![0i64; shape.len()];
                'outer: loop {
                    let offset = index.iter().zip(&strides);
                    expected.push(offset.map(|(&i, &s)| i128::from(i) * i128::from(s)).sum());
                    for d in (0..shape.len()).rev() {
                        index[d] += 1;
                        if index[d] < shape[d] {
                            continue 'outer;
                        }
                        index[d] = 0;
                    }
                    break;
                }
            }
            prop_assert_eq!(walked, expected);
        }

        #[test]
        fn arbitrary_inputs_never_panic(
            shape in prop::collection::vec(any::<i64>(), 0..5),
            strides in prop::collection::vec(any::<i64>(), 0..5),
            itemsize in 1usize..32,
        ) {
            let _ = Layout::new(&shape, Some(&strides), itemsize);
            let _ = Layout::new(&shape, None, itemsize);
        }
    }

    #[test]
    fn offsets_never_step_past_the_extent() {
        // Valid layouts whose "one past the end" offset would overflow i64.
        let l = Layout::new(&[2], Some(&[1 << 62]), 1).unwrap();
        let mut seen = vec![];
        for_each_offset(&l, |o| seen.push(o));
        assert_eq!(seen, vec![0, 1 << 62]);
        let l = Layout::new(&[5, 1], Some(&[2, i64::MAX]), 1).unwrap();
        let mut seen = vec![];
        for_each_offset(&l, |o| seen.push(o));
        assert_eq!(seen, vec![0, 2, 4, 6, 8]);
    }

    #[test]
    fn offsets_walk_row_major() {
        let l = Layout::new(&[2, 3], Some(&[1, 2]), 4).unwrap();
        let mut seen = vec![];
        for_each_offset(&l, |o| seen.push(o));
        assert_eq!(seen, vec![0, 2, 4, 1, 3, 5]);
        let empty = Layout::new(&[0, 3], None, 4).unwrap();
        for_each_offset(&empty, |_| panic!("no elements"));
    }

    #[test]
    fn address_range_bounds() {
        let max = isize::MAX as usize;
        let ok = |base, offset, lo, hi, itemsize| {
            check_address_range(base, offset, Reach { lo, hi }, itemsize).is_ok()
        };
        assert!(ok(0x1000, 0, 0, 15, 4));
        // The last reached byte may be isize::MAX - 1, not further.
        assert!(ok(max - 64, 0, 0, 15, 4));
        assert!(!ok(max - 63, 0, 0, 15, 4));
        assert!(!ok(max - 64, 1, 0, 15, 4));
        // Negative strides reach below the first element, but not below address 0.
        assert!(ok(0x1000, 0, -0x400, 0, 4));
        assert!(!ok(0x1000, 0, -0x401, 0, 4));
        assert!(ok(0x0ff0, 0x10, -0x400, 0, 4));
        assert!(!ok(usize::MAX - 3, 0, 0, 0, 1));
        assert!(!ok(0x1000, u64::MAX, 0, 0, 1));
    }

    #[test]
    fn distinct_elements() {
        let l = |shape: &[i64], strides: &[i64]| Layout::new(shape, Some(strides), 4).unwrap();
        assert!(l(&[2, 3], &[3, 1]).elements_are_distinct());
        assert!(l(&[2, 3], &[-3, -1]).elements_are_distinct());
        assert!(l(&[3, 2], &[1, 3]).elements_are_distinct());
        assert!(l(&[2, 3], &[6, 2]).elements_are_distinct());
        assert!(!l(&[2, 3], &[0, 1]).elements_are_distinct());
        assert!(!l(&[2, 3], &[2, 1]).elements_are_distinct());
        assert!(!l(&[4], &[0]).elements_are_distinct());
        assert!(l(&[1, 5], &[0, 1]).elements_are_distinct());
        assert!(l(&[0, 5], &[0, 0]).elements_are_distinct());
    }
}
