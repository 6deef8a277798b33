//! Zero-copy views that only reorder dimensions (used by tests, benchmarks and callers that
//! want a transposed view to copy from).

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::Described;
use crate::tensor::Tensor;

impl Tensor {
    /// A view of the same memory with its dimensions reordered: dimension `k` of the result is
    /// dimension `axes[k]` of `self` (the array API's `permute_dims`). No data moves; the view
    /// keeps the owner, device and read-only flag (a view is never `is_copied`).
    pub fn permute_dims(&self, axes: &[usize]) -> Result<Tensor> {
        let ndim = self.ndim();
        let mut seen = vec![false; ndim];
        let valid = axes.len() == ndim
            && axes
                .iter()
                .all(|&a| a < ndim && !std::mem::replace(&mut seen[a], true));
        if !valid {
            return Err(Error::InvalidArgument(format!(
                "axes {axes:?} are not a permutation of the {ndim} dimensions"
            )));
        }
        let shape: Vec<i64> = axes.iter().map(|&a| self.shape()[a]).collect();
        let strides: Vec<i64> = axes.iter().map(|&a| self.strides()[a]).collect();
        // A permutation reaches exactly the same elements, so the memory checks still hold.
        let layout = Layout::new(&shape, Some(&strides), self.itemsize())?;
        Ok(Tensor::from_described(
            Described {
                data: self.raw_data(),
                byte_offset: self.byte_offset(),
                device: self.device(),
                dtype: self.dtype(),
                layout,
                readonly: self.is_readonly(),
                is_copied: false,
                subbyte_padded: self.is_subbyte_padded(),
            },
            self.owner().clone(),
        ))
    }

    /// The view with the order of all dimensions reversed (`x.T`).
    pub fn transposed(&self) -> Tensor {
        let axes: Vec<usize> = (0..self.ndim()).rev().collect();
        self.permute_dims(&axes)
            .expect("a reversal is a permutation")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_and_transpose() {
        let t = Tensor::from_vec((0..24).collect::<Vec<u16>>(), &[2, 3, 4]).unwrap();
        let p = t.permute_dims(&[2, 0, 1]).unwrap();
        assert_eq!(p.shape(), &[4, 2, 3]);
        assert_eq!(p.strides(), &[1, 12, 4]);
        assert_eq!(p.data_ptr(), t.data_ptr());
        assert_eq!(t.transposed().shape(), &[4, 3, 2]);
        for bad in [&[0, 1][..], &[0, 1, 1], &[0, 1, 3]] {
            assert!(t.permute_dims(bad).is_err());
        }
    }
}
