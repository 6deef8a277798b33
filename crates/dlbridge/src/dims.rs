//! [`Dims`]: shape followed by strides, inline up to `N` values (no allocation for the small
//! tensors that dominate exchange traffic), on the heap beyond.

/// Shape and strides of one tensor, `2 * ndim` values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dims<const N: usize> {
    /// Up to `N` values; the first `.0` of `.1` are used.
    Inline(u8, [i64; N]),
    /// More than `N` values.
    Heap(Box<[i64]>),
}

impl<const N: usize> Dims<N> {
    /// `shape` followed by `strides`.
    pub(crate) fn new(shape: &[i64], strides: &[i64]) -> Self {
        let len = shape.len() + strides.len();
        if len <= N {
            // An element loop, not copy_from_slice: for these few values a memcpy call costs
            // more than the copy (this runs on every import and export).
            let mut values = [0; N];
            for (v, x) in values.iter_mut().zip(shape.iter().chain(strides)) {
                *v = *x;
            }
            Dims::Inline(len as u8, values)
        } else {
            Dims::Heap(shape.iter().chain(strides).copied().collect())
        }
    }

    /// `len` values written by `fill` (which gets them zeroed), and what `fill` returns. Lets
    /// a caller compute the values in place rather than build them elsewhere and copy them.
    #[inline(always)]
    pub(crate) fn build<R>(len: usize, fill: impl FnOnce(&mut [i64]) -> R) -> (Self, R) {
        if len <= N {
            let mut values = [0; N];
            let r = fill(&mut values[..len]);
            (Dims::Inline(len as u8, values), r)
        } else {
            let mut values = vec![0; len].into_boxed_slice();
            let r = fill(&mut values);
            (Dims::Heap(values), r)
        }
    }

    /// The values.
    pub(crate) fn as_slice(&self) -> &[i64] {
        match self {
            Dims::Inline(len, values) => &values[..usize::from(*len)],
            Dims::Heap(values) => values,
        }
    }

    /// The values, writable (their address is stable while `self` does not move).
    pub(crate) fn as_mut_ptr(&mut self) -> *mut i64 {
        match self {
            Dims::Inline(_, values) => values.as_mut_ptr(),
            Dims::Heap(values) => values.as_mut_ptr(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap() {
        let small = Dims::<4>::new(&[2, 3], &[3, 1]);
        assert!(matches!(small, Dims::Inline(4, _)));
        assert_eq!(small.as_slice(), &[2, 3, 3, 1]);
        let big = Dims::<4>::new(&[1, 2, 3], &[6, 3, 1]);
        assert!(matches!(big, Dims::Heap(_)));
        assert_eq!(big.as_slice(), &[1, 2, 3, 6, 3, 1]);
        assert_eq!(Dims::<4>::new(&[], &[]).as_slice(), &[] as &[i64]);
    }

    #[test]
    fn built_in_place() {
        for len in [0, 3, 4, 5, 9] {
            let (d, seen) = Dims::<4>::build(len, |values| {
                let seen = values.to_vec();
                values.iter_mut().zip(1..).for_each(|(v, i)| *v = i);
                seen
            });
            assert_eq!(matches!(d, Dims::Inline(..)), len <= 4);
            assert_eq!(seen, vec![0; len]);
            let expected: Vec<i64> = (1..=len as i64).collect();
            assert_eq!(d.as_slice(), expected.as_slice());
        }
    }
}
