//! [`HostBuffer`]: zero-initialised host memory aligned to 64 bytes.

use crate::error::{Error, Result};

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; 64]);

/// Owned host memory of a fixed length, aligned to 64 bytes.
pub struct HostBuffer {
    blocks: Vec<Block>,
    len: usize,
}

impl HostBuffer {
    /// `len` zeroed bytes.
    pub fn new(len: usize) -> Result<Self> {
        let count = len.div_ceil(64);
        let mut blocks = Vec::new();
        blocks
            .try_reserve_exact(count)
            .map_err(|_| Error::OutOfMemory(len))?;
        blocks.resize(count, Block([0; 64]));
        Ok(Self { blocks, len })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        let bytes: &[u8] = bytemuck_blocks(&self.blocks);
        &bytes[..self.len]
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut bytemuck_blocks_mut(&mut self.blocks)[..len]
    }
}

fn bytemuck_blocks(blocks: &[Block]) -> &[u8] {
    // SAFETY: Block is repr(C) plain bytes without padding; the slice covers exactly the blocks.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast(), blocks.len() * 64) }
}

fn bytemuck_blocks_mut(blocks: &mut [Block]) -> &mut [u8] {
    // SAFETY: as above, and the exclusive borrow of the blocks is carried to the bytes.
    unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast(), blocks.len() * 64) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        let mut b = HostBuffer::new(100).unwrap();
        assert_eq!(b.as_slice().len(), 100);
        assert_eq!(b.as_mut_slice().as_ptr() as usize % 64, 0);
        assert!(b.as_slice().iter().all(|x| *x == 0));
        assert_eq!(HostBuffer::new(0).unwrap().as_slice().len(), 0);
    }
}
