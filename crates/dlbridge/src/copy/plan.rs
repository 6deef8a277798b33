//! Copy planning: turn `(shape, source strides, destination strides)` into the fewest, longest
//! loops and pick a kernel. Pure index arithmetic, no memory access.
//!
//! The element-wise copy does not depend on the loop order, so the planner may drop unit
//! dimensions, walk a dimension backwards, reorder dimensions and merge neighbours that are
//! contiguous in both source and destination.

/// One loop: extent and strides in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dim {
    /// Extent (at least 1).
    pub n: usize,
    /// Source stride in elements.
    pub src: isize,
    /// Destination stride in elements.
    pub dst: isize,
}

/// How the innermost loops are run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Rows along the last dimension: one `memcpy` per row when both strides are 1, otherwise
    /// an element-wise strided loop.
    Rows,
    /// A cache-blocked transpose of the last two dimensions: the source is fast along the
    /// second-to-last, the destination along the last.
    Tiles,
}

/// A planned copy: loops outermost first, and the element shifts to apply to the base pointers
/// (dimensions walked backwards start at their far end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Loops, outermost first; never empty (a scalar is one loop of extent 1).
    pub dims: Vec<Dim>,
    /// The inner kernel.
    pub kernel: Kernel,
    /// Element offset to add to the source base.
    pub src_shift: isize,
    /// Element offset to add to the destination base.
    pub dst_shift: isize,
}

/// Extents at least this long on both tiled dimensions make a transpose worth blocking.
const MIN_TILE_EXTENT: usize = 8;

/// Plan a copy of `shape` from a source with `src` strides into a destination with `dst`
/// strides (all in elements). `None` when there is nothing to copy (a zero extent).
///
/// The strides must come from validated layouts, so every product below fits in `isize`.
pub(crate) fn plan(shape: &[i64], src: &[i64], dst: &[i64]) -> Option<Plan> {
    debug_assert!(shape.len() == src.len() && shape.len() == dst.len());
    if shape.contains(&0) {
        return None;
    }
    let (mut src_shift, mut dst_shift) = (0isize, 0isize);
    let mut dims: Vec<Dim> = Vec::with_capacity(shape.len());
    for ((&n, &s), &d) in shape.iter().zip(src).zip(dst) {
        if n == 1 {
            continue;
        }
        let mut dim = Dim {
            n: n as usize,
            src: s as isize,
            dst: d as isize,
        };
        // Walk destination-descending dimensions from their far end.
        if dim.dst < 0 {
            let last = (dim.n - 1) as isize;
            src_shift += last * dim.src;
            dst_shift += last * dim.dst;
            dim.src = -dim.src;
            dim.dst = -dim.dst;
        }
        dims.push(dim);
    }
    // Destination-major order: the destination is written as sequentially as possible.
    dims.sort_by_key(|d| std::cmp::Reverse(d.dst));
    let dims = merge(dims);
    let mut dims = if dims.is_empty() {
        vec![Dim {
            n: 1,
            src: 1,
            dst: 1,
        }]
    } else {
        dims
    };
    let kernel = choose_kernel(&mut dims);
    Some(Plan {
        dims,
        kernel,
        src_shift,
        dst_shift,
    })
}

/// Merge each dimension into the next inner one when both strides nest exactly.
fn merge(dims: Vec<Dim>) -> Vec<Dim> {
    let mut out: Vec<Dim> = Vec::with_capacity(dims.len());
    for dim in dims.into_iter().rev() {
        match out.last_mut() {
            Some(inner)
                if dim.src == inner.src * inner.n as isize
                    && dim.dst == inner.dst * inner.n as isize =>
            {
                inner.n *= dim.n;
            }
            _ => out.push(dim),
        }
    }
    out.reverse();
    out
}

/// Choose the kernel; for [`Kernel::Tiles`], move the source-fastest dimension to the
/// second-to-last place.
fn choose_kernel(dims: &mut [Dim]) -> Kernel {
    let last = dims.len() - 1;
    let inner = dims[last];
    if last == 0 || inner.src.unsigned_abs() <= 1 || inner.n < MIN_TILE_EXTENT {
        return Kernel::Rows;
    }
    let (a, fast) = dims[..last]
        .iter()
        .enumerate()
        .min_by_key(|(_, d)| d.src.unsigned_abs())
        .expect("at least two dimensions");
    if fast.src.unsigned_abs() >= inner.src.unsigned_abs() || fast.n < MIN_TILE_EXTENT {
        return Kernel::Rows;
    }
    let fast = *fast;
    dims.copy_within(a + 1..last, a);
    dims[last - 1] = fast;
    Kernel::Tiles
}

/// True when no two elements of a layout (strides in elements) share an address, by a
/// sufficient test: sorted by stride, each stride clears the span of all smaller ones.
pub(crate) fn provably_disjoint(shape: &[i64], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut dims: Vec<(u64, u64)> = shape
        .iter()
        .zip(strides)
        .filter(|(n, _)| **n > 1)
        .map(|(&n, &s)| (s.unsigned_abs(), n as u64))
        .collect();
    dims.sort_unstable();
    let mut span: u64 = 1;
    for (stride, n) in dims {
        if stride < span {
            return false;
        }
        span = stride
            .checked_mul(n - 1)
            .and_then(|x| x.checked_add(span))
            .unwrap_or(u64::MAX);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(p: &Plan) -> Vec<(usize, isize, isize)> {
        p.dims.iter().map(|d| (d.n, d.src, d.dst)).collect()
    }

    #[test]
    fn contiguous_collapses_to_one_row() {
        let p = plan(&[2, 3, 4], &[12, 4, 1], &[12, 4, 1]).unwrap();
        assert_eq!(dims(&p), vec![(24, 1, 1)]);
        assert_eq!(p.kernel, Kernel::Rows);
        let scalar = plan(&[], &[], &[]).unwrap();
        assert_eq!(dims(&scalar), vec![(1, 1, 1)]);
        assert!(plan(&[3, 0], &[1, 1], &[1, 1]).is_none());
    }

    #[test]
    fn transpose_is_tiled() {
        // a.T of a (64, 32) C array into C order: shape (32, 64), src strides (1, 32).
        let p = plan(&[32, 64], &[1, 32], &[64, 1]).unwrap();
        assert_eq!(p.kernel, Kernel::Tiles);
        assert_eq!(dims(&p), vec![(32, 1, 64), (64, 32, 1)]);
        // A batch of transposes: the fast source dim moves next to the last.
        // (a (32, 4, 16) C array with its axes reversed)
        let p = plan(&[16, 4, 32], &[1, 16, 64], &[128, 32, 1]).unwrap();
        assert_eq!(p.kernel, Kernel::Tiles);
        assert_eq!(dims(&p), vec![(4, 16, 32), (16, 1, 128), (32, 64, 1)]);
        // Small extents stay element-wise.
        assert_eq!(
            plan(&[3, 64], &[1, 3], &[64, 1]).unwrap().kernel,
            Kernel::Rows
        );
    }

    #[test]
    fn negative_strides_walk_backwards() {
        // Reversed rows of a (3, 4) array: dst strides positive, src inner stride -1.
        let p = plan(&[3, 4], &[4, -1], &[4, 1]).unwrap();
        assert_eq!(dims(&p), vec![(3, 4, 4), (4, -1, 1)]);
        assert_eq!((p.src_shift, p.dst_shift), (0, 0));
        // A negative destination stride is flipped onto the source.
        let p = plan(&[5], &[1], &[-1]).unwrap();
        assert_eq!(dims(&p), vec![(5, -1, 1)]);
        assert_eq!((p.src_shift, p.dst_shift), (4, -4));
    }

    #[test]
    fn f_order_destination_reorders() {
        let p = plan(&[3, 4], &[4, 1], &[1, 3]).unwrap();
        assert_eq!(dims(&p), vec![(4, 1, 3), (3, 4, 1)]);
    }

    #[test]
    fn disjointness() {
        assert!(provably_disjoint(&[3, 4], &[4, 1]));
        assert!(provably_disjoint(&[3, 4], &[1, -3]));
        assert!(provably_disjoint(&[2, 2], &[3, 2]));
        assert!(!provably_disjoint(&[3, 4], &[0, 1]));
        assert!(!provably_disjoint(&[3, 4], &[2, 1]));
        assert!(provably_disjoint(&[0, 4], &[0, 0]));
        assert!(provably_disjoint(&[1, 4], &[0, 1]));
    }
}
