//! Shape and strides: the single place that decides whether a layout is sane.
//!
//! Strides are in elements (the DLPack convention). All arithmetic is checked: a layout is
//! accepted only if every element address it implies fits in `isize` bytes.

use crate::error::{Error, Result};

/// Most dimensions a layout may have (the buffer protocol's `PyBUF_MAX_NDIM`).
pub const MAX_NDIM: usize = 64;

/// Shape followed by strides; up to 2 dimensions live inline (no allocation). Kept small so a
/// `Tensor` moves cheaply.
type Dims = crate::dims::Dims<4>;

/// A validated shape and strides (in elements). Strides are always present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    dims: Dims,
    size: usize,
}

fn invalid(msg: String) -> Error {
    Error::InvalidLayout(msg)
}

/// Row-major strides (in elements) for `shape`, or `None` on overflow. Dims of extent 0 are
/// treated like extent 1 so a zero-size `(0, 2048)` gets `(2048, 1)`.
pub fn c_strides(shape: &[i64]) -> Option<Vec<i64>> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.checked_mul(n.max(1))?;
    }
    Some(strides)
}

/// Column-major strides (in elements) for `shape`, or `None` on overflow.
pub fn f_strides(shape: &[i64]) -> Option<Vec<i64>> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (s, &n) in strides.iter_mut().zip(shape) {
        *s = acc;
        acc = acc.checked_mul(n.max(1))?;
    }
    Some(strides)
}

impl Layout {
    /// Validate `shape` and `strides` (elements; `None` = C-contiguous) for elements of
    /// `itemsize` bytes.
    pub fn new(shape: &[i64], strides: Option<&[i64]>, itemsize: usize) -> Result<Self> {
        if shape.len() > MAX_NDIM {
            return Err(invalid(format!(
                "ndim {} exceeds the maximum of {MAX_NDIM}",
                shape.len()
            )));
        }
        if let Some(s) = strides.filter(|s| s.len() != shape.len()) {
            return Err(invalid(format!(
                "{} strides for {} dimensions",
                s.len(),
                shape.len()
            )));
        }
        // One pass over the extents: no negative extent, and the dense strides must exist even
        // for zero-size layouts (copies and exports use them), so the product of the extents,
        // zeros counted as ones, must fit. The element count is at most that product.
        let mut dense: i64 = 1;
        let mut size: i64 = 1;
        for (i, &n) in shape.iter().enumerate() {
            if n < 0 {
                return Err(invalid(format!(
                    "negative extent {n} in dimension {i} of shape {shape:?}"
                )));
            }
            dense = dense
                .checked_mul(n.max(1))
                .ok_or_else(|| invalid(format!("shape {shape:?} overflows")))?;
            size *= n;
        }
        let size =
            usize::try_from(size).map_err(|_| invalid(format!("shape {shape:?} too large")))?;
        let Some(strides) = strides else {
            // C-contiguous: the elements span exactly `size` items.
            if size
                .checked_mul(itemsize.max(1))
                .is_none_or(|b| b > isize::MAX as usize)
            {
                return Err(invalid(format!(
                    "shape {shape:?} spans more memory than can exist"
                )));
            }
            let strides = c_strides(shape).expect("the dense product fits");
            return Ok(Self {
                dims: Dims::new(shape, &strides),
                size,
            });
        };
        if size > 0 {
            // Every element address must fit: the span from the lowest to the highest
            // reachable element, in bytes, within isize::MAX.
            let (mut lo, mut hi) = (0i64, 0i64);
            for (&n, &s) in shape.iter().zip(strides) {
                let reach = (n - 1)
                    .checked_mul(s)
                    .ok_or_else(|| invalid(format!("stride {s} with extent {n} overflows")))?;
                let side = if reach < 0 { &mut lo } else { &mut hi };
                *side = side
                    .checked_add(reach)
                    .ok_or_else(|| invalid(format!("strides {strides:?} overflow")))?;
            }
            let span_bytes = hi
                .checked_sub(lo)
                .and_then(|d| d.checked_add(1))
                .and_then(|e| usize::try_from(e).ok())
                .and_then(|e| e.checked_mul(itemsize.max(1)))
                .filter(|b| *b <= isize::MAX as usize);
            if span_bytes.is_none() {
                return Err(invalid(format!(
                    "shape {shape:?} with strides {strides:?} spans more memory than can exist"
                )));
            }
        }
        Ok(Self {
            dims: Dims::new(shape, strides),
            size,
        })
    }

    /// A C-contiguous layout for `shape`.
    pub fn contiguous(shape: &[i64], itemsize: usize) -> Result<Self> {
        Self::new(shape, None, itemsize)
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
        self.reach().filter(|r| *r < 0).sum()
    }
    /// Highest element offset reachable from the first element (`>= 0`; 0 when empty).
    pub fn max_offset(&self) -> i64 {
        self.reach().filter(|r| *r > 0).sum()
    }

    /// `(extent - 1) * stride` per dimension (nothing when empty); validated not to overflow.
    fn reach(&self) -> impl Iterator<Item = i64> + '_ {
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

    proptest! {
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
            crate::copy::for_each_offset(&l, |o| offsets.push(o));
            prop_assert_eq!(offsets.len(), l.size());
            for off in offsets {
                prop_assert!(l.min_offset() <= off && off <= l.max_offset());
            }
            prop_assert!(l.size() == 0 || offsets_hit_bounds(&shape, &strides, &l));
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
}
