//! Reading a live Arrow schema and array: the only code that reads the memory an Arrow
//! producer handed over (formats, metadata, children, buffers), each field checked before use.

use std::ffi::{CStr, c_void};
use std::ptr;
use std::sync::Arc;

use crate::copy::HostBuffer;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::ffi::arrow::{ArrowArray, ArrowSchema};

use super::{invalid, released_error};
use crate::layout::Layout;
use crate::tensor::{Owner, Tensor, TensorFlags};

/// Read access to a live schema's fields (valid while its owner is unreleased).
#[derive(Clone, Copy, Debug)]
pub struct SchemaView<'a>(pub(super) &'a ArrowSchema);

/// Largest metadata blob dlbridge reads (a sanity bound against garbage lengths).
const MAX_METADATA_BYTES: usize = 1 << 30;

impl<'a> SchemaView<'a> {
    /// Borrow a schema that someone else owns (e.g. a `requested_schema` capsule).
    ///
    /// # Safety
    /// `ptr` must be NULL or point to an `ArrowSchema` that stays valid and unreleased for
    /// `'a`.
    pub unsafe fn borrow(ptr: *const ArrowSchema) -> Result<Self> {
        // SAFETY: caller's contract.
        match unsafe { ptr.as_ref() } {
            None => Err(invalid("the ArrowSchema pointer is NULL")),
            Some(s) if s.is_released() => Err(released_error("ArrowSchema")),
            Some(s) => Ok(Self(s)),
        }
    }

    /// The format string.
    pub fn format(self) -> Result<&'a str> {
        if self.0.format.is_null() {
            return Err(invalid("the ArrowSchema's format is NULL"));
        }
        // SAFETY: a valid schema's format is a NUL-terminated string that lives as long as the
        // schema.
        let format = unsafe { CStr::from_ptr(self.0.format) };
        format
            .to_str()
            .map_err(|_| invalid("the ArrowSchema's format is not UTF-8"))
    }

    /// The field name, if any (and valid UTF-8).
    pub fn name(self) -> Option<&'a str> {
        if self.0.name.is_null() {
            return None;
        }
        // SAFETY: as for `format`.
        unsafe { CStr::from_ptr(self.0.name) }.to_str().ok()
    }

    /// The flags (`FLAG_*`).
    pub fn flags(self) -> i64 {
        self.0.flags
    }

    /// True for a dictionary-encoded field.
    pub fn has_dictionary(self) -> bool {
        !self.0.dictionary.is_null()
    }

    /// The metadata as (key, value) byte pairs, in order (empty when absent).
    pub fn metadata(self) -> Result<Vec<(&'a [u8], &'a [u8])>> {
        let mut pairs = vec![];
        self.each_metadata(|key, value| pairs.push((key, value)))?;
        Ok(pairs)
    }

    /// The value of metadata `key`, if present (the first one). The whole blob is checked, as
    /// [`SchemaView::metadata`] does, but nothing is allocated.
    pub fn metadata_value(self, key: &str) -> Result<Option<&'a [u8]>> {
        let mut found = None;
        self.each_metadata(|k, value| {
            if found.is_none() && k == key.as_bytes() {
                found = Some(value);
            }
        })?;
        Ok(found)
    }

    /// Call `visit` on each (key, value) pair of the metadata, in order; an error for a
    /// malformed blob (after visiting the pairs before the fault).
    fn each_metadata(self, mut visit: impl FnMut(&'a [u8], &'a [u8])) -> Result<()> {
        let base = self.0.metadata.cast::<u8>();
        if base.is_null() {
            return Ok(());
        }
        let bad = || invalid("the ArrowSchema's metadata is malformed");
        let mut pos = 0usize;
        // Reads a native-endian int32 length at `pos`.
        let read_len = |pos: &mut usize| -> Result<usize> {
            // SAFETY: a valid metadata blob holds an int32 at every position the encoding
            // announces; the read is unaligned-safe.
            let n = unsafe { ptr::read_unaligned(base.add(*pos).cast::<i32>()) };
            *pos += 4;
            usize::try_from(n)
                .ok()
                .filter(|n| *pos + n <= MAX_METADATA_BYTES)
                .ok_or_else(bad)
        };
        let count = read_len(&mut pos)?;
        for _ in 0..count {
            let mut bytes = [&[][..], &[][..]];
            for item in &mut bytes {
                let len = read_len(&mut pos)?;
                // SAFETY: the encoding announced `len` bytes at `pos`, within the blob, which
                // lives as long as the schema.
                *item = unsafe { std::slice::from_raw_parts(base.add(pos), len) };
                pos += len;
            }
            visit(bytes[0], bytes[1]);
        }
        Ok(())
    }

    /// The child fields.
    pub fn children(self) -> Result<Vec<SchemaView<'a>>> {
        let ptrs = self.child_pointers()?;
        ptrs.iter()
            .map(|&child| {
                // SAFETY: each pointer is NULL or a child schema that lives as long as the
                // parent (children are released by the parent only).
                unsafe { SchemaView::borrow(child) }
            })
            .collect()
    }

    /// The only child field when there is exactly one (what [`SchemaView::children`] would
    /// return alone, with the same errors), `None` for any other count; nothing is allocated.
    pub fn single_child(self) -> Result<Option<SchemaView<'a>>> {
        match self.child_pointers()? {
            // SAFETY: as in `children`.
            [child] => unsafe { SchemaView::borrow(*child) }.map(Some),
            _ => Ok(None),
        }
    }

    /// The `n_children` child pointers (checked count; a NULL array only when there are none).
    fn child_pointers(self) -> Result<&'a [*mut ArrowSchema]> {
        let n = checked_count(self.0.n_children, "n_children")?;
        if n == 0 {
            return Ok(&[]);
        }
        if self.0.children.is_null() {
            return Err(invalid(
                "the ArrowSchema has children but a NULL children array",
            ));
        }
        // SAFETY: a valid schema has `n_children` child pointers, live as long as the parent.
        Ok(unsafe { std::slice::from_raw_parts(self.0.children, n) })
    }
}

fn checked_count(n: i64, what: &str) -> Result<usize> {
    usize::try_from(n)
        .ok()
        .filter(|n| *n <= 1 << 20)
        .ok_or_else(|| invalid(format!("invalid {what} {n}")))
}

/// Bits per value of the fixed-width formats dlbridge reads (`b` is the bit-packed boolean).
pub(super) fn fixed_width_bits(format: &str) -> Option<u32> {
    Some(match format {
        "b" => 1,
        "c" | "C" => 8,
        "s" | "S" | "e" => 16,
        "i" | "I" | "f" => 32,
        "l" | "L" | "g" => 64,
        _ => return None,
    })
}

/// One level of a schema/array pair: a field and the array it describes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node<'a> {
    pub(super) schema: SchemaView<'a>,
    pub(super) array: &'a ArrowArray,
    pub(super) device: Device,
}

impl<'a> Node<'a> {
    /// The field.
    pub(crate) fn schema(self) -> SchemaView<'a> {
        self.schema
    }
    /// Number of items.
    pub(crate) fn length(self) -> i64 {
        self.array.length
    }
    /// Items skipped at the start of the buffers.
    pub(crate) fn offset(self) -> i64 {
        self.array.offset
    }
    /// True for a dictionary-encoded array.
    pub(crate) fn has_dictionary(self) -> bool {
        !self.array.dictionary.is_null()
    }

    /// Length and offset, checked to be non-negative and to fit together.
    fn extent(self) -> Result<(i64, i64)> {
        let (length, offset) = (self.array.length, self.array.offset);
        if length < 0 || offset < 0 || length.checked_add(offset).is_none() {
            return Err(invalid(format!(
                "invalid ArrowArray length {length} / offset {offset}"
            )));
        }
        Ok((length, offset))
    }

    /// The child levels (schema and array children paired; counts must agree).
    pub(crate) fn children(self) -> Result<Vec<Node<'a>>> {
        let schemas = self.schema.children()?;
        let n = checked_count(self.array.n_children, "n_children")?;
        if n != schemas.len() {
            return Err(invalid(format!(
                "the ArrowArray has {n} children but its schema has {}",
                schemas.len()
            )));
        }
        self.child_arrays(n)?
            .iter()
            .zip(schemas)
            .map(|(&child, schema)| self.child(schema, child))
            .collect()
    }

    /// The only child level when the schema and the array each have exactly one child (what
    /// [`Node::children`] would return alone, with the same errors), `None` when either count
    /// is another one (ask [`Node::children`] for the error); nothing is allocated.
    pub(crate) fn single_child(self) -> Result<Option<Node<'a>>> {
        let Some(schema) = self.schema.single_child()? else {
            return Ok(None);
        };
        if self.array.n_children != 1 {
            return Ok(None);
        }
        self.child(schema, self.child_arrays(1)?[0]).map(Some)
    }

    /// The array's `n` child pointers (`n` being its checked `n_children`).
    fn child_arrays(self, n: usize) -> Result<&'a [*mut ArrowArray]> {
        if n == 0 {
            return Ok(&[]);
        }
        if self.array.children.is_null() {
            return Err(invalid(
                "the ArrowArray has children but a NULL children array",
            ));
        }
        // SAFETY: a valid array has `n_children` child pointers, live as long as the parent.
        Ok(unsafe { std::slice::from_raw_parts(self.array.children, n) })
    }

    /// The level of child array `child` (one of [`Node::child_arrays`]) under field `schema`.
    fn child(self, schema: SchemaView<'a>, child: *mut ArrowArray) -> Result<Node<'a>> {
        // SAFETY: each child pointer is NULL or a child array that lives as long as the parent.
        match unsafe { child.as_ref() } {
            None => Err(invalid("NULL child ArrowArray")),
            Some(array) => Ok(Node {
                schema,
                array,
                device: self.device,
            }),
        }
    }

    /// Buffer `index`, after checking that the array has exactly `expected` buffers.
    fn buffer(self, index: usize, expected: usize) -> Result<*const c_void> {
        let n = checked_count(self.array.n_buffers, "n_buffers")?;
        if n != expected {
            return Err(invalid(format!(
                "the ArrowArray has {n} buffers where its format {:?} needs {expected}",
                self.schema.format().unwrap_or("?")
            )));
        }
        if self.array.buffers.is_null() {
            return Err(invalid("the ArrowArray's buffers array is NULL"));
        }
        // SAFETY: a valid array has `n_buffers` buffer pointers and `index < n_buffers`.
        Ok(unsafe { *self.array.buffers.add(index) })
    }

    /// The number of null items among logical items `[start, start + count)`.
    ///
    /// Reads the validity bitmap (buffer 0, which every layout dlbridge reads has) only when
    /// the producer's `null_count` does not already answer; a bitmap on a device the CPU cannot
    /// read is an error unless the count is known. `n_buffers` is the number of buffers the
    /// field's layout has (1 for a fixed-size list, 2 for a primitive array); a mismatch is an
    /// error.
    pub(crate) fn count_nulls(self, start: i64, count: i64, n_buffers: usize) -> Result<i64> {
        let length = self.check_range(start, count)?;
        let null_count = self.array.null_count;
        if null_count == 0 || count == 0 {
            return Ok(0);
        }
        if null_count > 0 && start == 0 && count == length {
            return Ok(null_count);
        }
        let Some((bits, first)) = self.validity(start, n_buffers)? else {
            return Ok(0);
        };
        let valid = (first..first + count as usize)
            .filter(|&j| bits[j / 8] >> (j % 8) & 1 == 1)
            .count();
        Ok(count - valid as i64)
    }

    /// The positions (relative to `start`) of the null items among logical items
    /// `[start, start + count)`, read from the validity bitmap (see [`Node::count_nulls`]).
    pub(crate) fn null_positions(
        self,
        start: i64,
        count: i64,
        n_buffers: usize,
    ) -> Result<Vec<usize>> {
        self.check_range(start, count)?;
        if self.array.null_count == 0 || count == 0 {
            return Ok(vec![]);
        }
        let Some((bits, first)) = self.validity(start, n_buffers)? else {
            return Ok(vec![]);
        };
        Ok((0..count as usize)
            .filter(|&k| bits[(first + k) / 8] >> ((first + k) % 8) & 1 == 0)
            .collect())
    }

    /// Checks that items `[start, start + count)` lie in the array; returns its length.
    fn check_range(self, start: i64, count: i64) -> Result<i64> {
        let (length, _) = self.extent()?;
        if start < 0 || count < 0 || start.checked_add(count).is_none_or(|end| end > length) {
            return Err(invalid(format!(
                "items {start}..{start}+{count} are outside the array of length {length}"
            )));
        }
        Ok(length)
    }

    /// The validity bitmap (`None` when absent) and the bit of logical item `start`.
    fn validity(self, start: i64, n_buffers: usize) -> Result<Option<(&'a [u8], usize)>> {
        let (length, offset) = self.extent()?;
        let validity = self.buffer(0, n_buffers)?;
        if validity.is_null() {
            return Ok(None);
        }
        if !self.device.is_host_accessible() {
            return Err(invalid(format!(
                "cannot check for nulls: the validity bitmap is on {} and the producer did not report a null_count of 0",
                self.device
            )));
        }
        let total_bits = (offset + length) as usize;
        // SAFETY: buffer 0 of these layouts is a validity bitmap covering `offset + length`
        // bits, in host-readable memory that lives as long as the array.
        let bits =
            unsafe { std::slice::from_raw_parts(validity.cast::<u8>(), total_bits.div_ceil(8)) };
        Ok(Some((bits, (offset + start) as usize)))
    }

    /// A zero-copy, read-only tensor over the values buffer (buffer 1) of a fixed-width leaf.
    ///
    /// `start` is the physical index (counted from the start of the buffer, so including the
    /// array's `offset`) of the tensor's first element; every element `layout` reaches must be
    /// an item of the buffer.
    ///
    /// # Safety
    /// `owner` must keep the array this node belongs to alive (for example, hold the `Arc` of
    /// its [`ArrowData`](crate::arrow::ArrowData)): the tensor points into the array's buffers and outlives this borrow.
    pub(crate) unsafe fn values_tensor(
        self,
        start: i64,
        layout: Layout,
        dtype: DType,
        owner: Owner,
    ) -> Result<Tensor> {
        let format = self.schema.format()?;
        let bits = fixed_width_bits(format)
            .filter(|b| *b >= 8 && dtype.lanes() == 1 && u32::from(dtype.bits()) == *b)
            .ok_or_else(|| {
                invalid(format!(
                    "format {format:?} does not hold {dtype} values in place"
                ))
            })?;
        self.reached_items(start, &layout)?;
        let data = self.buffer(1, 2)?;
        if data.is_null() && layout.size() > 0 {
            return Err(invalid("the values buffer is NULL for a non-empty array"));
        }
        let itemsize = u64::from(bits / 8);
        // `start >= 0`: reached_items checked `start + min_offset >= 0` and `min_offset <= 0`.
        let byte_offset = if layout.size() == 0 {
            0
        } else {
            start as u64 * itemsize
        };
        // The producer guarantees buffer 1 of this fixed-width array holds `offset + length`
        // items of `bits` bits (its schema describes it: ArrowData::new), alive until release,
        // which `owner` delays (this function's contract). Arrow data is immutable: read-only.
        // SAFETY: `reached_items` checked every element the layout reaches is one of those items.
        unsafe {
            Tensor::from_raw_parts(
                data.cast_mut(),
                byte_offset,
                self.device,
                dtype,
                layout,
                TensorFlags::READONLY,
                owner,
            )
        }
    }

    /// A writable copy of bit-packed booleans (format `b`), one byte (0 or 1) per element, laid
    /// out by `layout` from physical bit `start` (see [`Node::values_tensor`]).
    pub(crate) fn unpack_bools(self, start: i64, layout: Layout) -> Result<Tensor> {
        let format = self.schema.format()?;
        if format != "b" {
            return Err(invalid(format!(
                "format {format:?} is not bit-packed boolean"
            )));
        }
        self.device.require_host()?;
        let (first, last) = self.reached_items(start, &layout)?;
        let span = if layout.size() == 0 {
            0
        } else {
            (last - first + 1) as usize
        };
        // The bitmap is checked before anything is allocated for the unpacked bytes.
        let data = if span > 0 {
            self.buffer(1, 2)?
        } else {
            std::ptr::null()
        };
        if span > 0 && data.is_null() {
            return Err(invalid("the values buffer is NULL for a non-empty array"));
        }
        let mut out = HostBuffer::new(span)?;
        if span > 0 {
            let (length, offset) = self.extent()?;
            let total_bits = (offset + length) as usize;
            // SAFETY: buffer 1 of a boolean array is a bitmap of `offset + length` bits in
            // host-readable memory, alive while the array is (the caller holds it).
            let bits =
                unsafe { std::slice::from_raw_parts(data.cast::<u8>(), total_bits.div_ceil(8)) };
            for (k, byte) in out.as_mut_slice().iter_mut().enumerate() {
                let j = first as usize + k;
                *byte = bits[j / 8] >> (j % 8) & 1;
            }
        }
        // Element 0 sits `-min_offset` elements after the first reached one (byte 0).
        host_tensor(out, (-layout.min_offset()) as u64, DType::BOOL, layout)
    }

    /// The first and last physical item `layout` reaches from `start`, checked to lie in
    /// `0..offset + length`.
    fn reached_items(self, start: i64, layout: &Layout) -> Result<(i64, i64)> {
        let (length, offset) = self.extent()?;
        if layout.size() == 0 {
            return Ok((0, -1));
        }
        let first = start.checked_add(layout.min_offset());
        let last = start.checked_add(layout.max_offset());
        match (first, last) {
            (Some(first), Some(last)) if first >= 0 && last < offset + length => Ok((first, last)),
            _ => Err(invalid(format!(
                "the tensor would reach items outside the Arrow buffer of {} items",
                offset + length
            ))),
        }
    }
}

/// A writable host tensor that owns `buffer`, its element 0 at `byte_offset`; refused unless
/// every element `layout` reaches lies inside the buffer.
pub(crate) fn host_tensor(
    mut buffer: HostBuffer,
    byte_offset: u64,
    dtype: DType,
    layout: Layout,
) -> Result<Tensor> {
    let itemsize = dtype.itemsize() as i128;
    let len = buffer.as_slice().len() as i128;
    let first = i128::from(byte_offset);
    let fits = layout.size() == 0
        || first + i128::from(layout.min_offset()) * itemsize >= 0
            && first + (i128::from(layout.max_offset()) + 1) * itemsize <= len;
    if !fits || dtype.is_subbyte() {
        return Err(invalid(format!(
            "a layout of shape {:?} does not fit a buffer of {len} bytes",
            layout.shape()
        )));
    }
    let data = buffer.as_mut_slice().as_mut_ptr();
    // SAFETY: checked above: every element the layout reaches from `data + byte_offset` lies in
    // `buffer`, which the owner passed along keeps alive; the memory is writable and aliased by
    // nothing else.
    unsafe {
        Tensor::from_raw_parts(
            data.cast(),
            byte_offset,
            Device::CPU,
            dtype,
            layout,
            TensorFlags::COPIED,
            Arc::new(buffer),
        )
    }
}
