//! [`Tensor`]: an owned, validated description of array memory plus what keeps it alive.

use std::any::Any;
use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::check_address_range;
use crate::layout::{Layout, Reach};

/// What a validated managed tensor describes.
#[derive(Debug)]
pub(crate) struct Described {
    pub data: *mut c_void,
    pub byte_offset: u64,
    pub device: Device,
    pub dtype: DType,
    pub layout: Layout,
    pub readonly: bool,
    pub is_copied: bool,
    pub subbyte_padded: bool,
}

/// What the memory behind a tensor allows, as DLPack's `READ_ONLY` and `IS_COPIED` flags say
/// it: the flags argument of [`Tensor::from_raw_parts`].
///
/// The default ([`TensorFlags::WRITABLE`]) is writable memory that others may reach too, such
/// as a producer's array imported without a copy.
///
/// ```
/// use dlbridge::TensorFlags;
///
/// assert_eq!(TensorFlags::default(), TensorFlags::WRITABLE);
/// let flags = TensorFlags { readonly: true, ..TensorFlags::default() };
/// assert_eq!(flags, TensorFlags::READONLY);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TensorFlags {
    /// The memory must not be written through the tensor ([`Tensor::is_readonly`]).
    pub readonly: bool,
    /// The memory is a copy made for the tensor, which no one outside its owner reaches
    /// ([`Tensor::is_copied`]); such memory must be writable, even when `readonly` is set.
    pub copied: bool,
}

impl TensorFlags {
    /// Writable memory that others may reach too (a producer's array, imported in place).
    pub const WRITABLE: Self = Self {
        readonly: false,
        copied: false,
    };
    /// Memory that must not be written through the tensor.
    pub const READONLY: Self = Self {
        readonly: true,
        copied: false,
    };
    /// A writable copy made for the tensor, which only its owner reaches.
    pub const COPIED: Self = Self {
        readonly: false,
        copied: true,
    };
}

/// Something that keeps a tensor's memory alive; dropped when the last tensor or export using
/// the memory is gone (on any thread).
pub type Owner = Arc<dyn Any + Send + Sync>;

/// An owned, validated view of array memory: device, dtype, layout (strides in elements), flags,
/// and the owner that keeps the memory alive.
///
/// Cloning is cheap and shares the memory. The owner (for an imported managed tensor, the
/// producer's deleter) is released exactly once, when the last clone and the last export are
/// dropped.
#[derive(Clone)]
pub struct Tensor {
    data: *mut c_void,
    byte_offset: u64,
    device: Device,
    dtype: DType,
    layout: Layout,
    readonly: bool,
    is_copied: bool,
    subbyte_padded: bool,
    owner: Owner,
}

// SAFETY: the raw `data` pointer is only a description; the memory it points to is
// kept alive by `owner`, which is Send + Sync, and a Tensor never writes through the pointer
// itself (writes happen only through explicitly unsafe or `&mut`-gated APIs of the copy module).
unsafe impl Send for Tensor {}
// SAFETY: see above.
unsafe impl Sync for Tensor {}

#[cold]
#[inline(never)]
fn null_data() -> Error {
    Error::InvalidLayout("data is NULL for a non-empty tensor".to_owned())
}

/// Rust element types that may be viewed in place: [`Tensor::as_slice`] and [`Tensor::to_vec`]
/// read a tensor's memory of dtype [`Element::DTYPE`] as values of `Self`.
///
/// # Safety
/// An implementation promises, for the bytes of one item of `DTYPE`:
/// - `size_of::<Self>()` equals `DTYPE.itemsize()`, and `align_of::<Self>()` is the alignment
///   such items have (the element's natural alignment, never more than its size);
/// - every bit pattern of that size is a valid `Self`: no padding bytes, no niches (`bool`,
///   `char`, enums, references, `NonZero*` are not elements);
/// - `Self` has no interior mutability (no `Cell`, `UnsafeCell` or atomics): views are shared
///   borrows of memory that other tensors may also read.
///
/// The typed views check size and alignment again at run time (a mismatch is an error), but
/// the other promises cannot be checked. A newtype over a primitive keeps them:
///
/// ```
/// use dlbridge::{DType, Element, Tensor};
///
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// #[repr(transparent)]
/// struct Meters(f64);
/// // SAFETY: `repr(transparent)` over f64: the size, alignment and valid bit patterns of float64.
/// unsafe impl Element for Meters {
///     const DTYPE: DType = DType::FLOAT64;
/// }
///
/// let t = Tensor::from_vec(vec![1.5f64, 2.0], &[2])?;
/// assert_eq!(t.as_slice::<Meters>()?, &[Meters(1.5), Meters(2.0)]);
/// # Ok::<(), dlbridge::Error>(())
/// ```
///
/// A safe `impl` does not compile:
///
/// ```compile_fail,E0200
/// #[derive(Clone, Copy)]
/// struct Big([u8; 32]);
/// impl dlbridge::Element for Big {
///     const DTYPE: dlbridge::DType = dlbridge::DType::UINT8;
/// }
/// ```
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The matching dtype.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => { $(
        // SAFETY: a primitive number of exactly the dtype's size and natural alignment, valid
        // for every bit pattern, without interior mutability.
        unsafe impl Element for $t { const DTYPE: DType = DType::$d; }
    )* };
}
element!(
    i8 => INT8, i16 => INT16, i32 => INT32, i64 => INT64,
    u8 => UINT8, u16 => UINT16, u32 => UINT32, u64 => UINT64,
    f32 => FLOAT32, f64 => FLOAT64, half::f16 => FLOAT16, half::bf16 => BFLOAT16,
);

impl Tensor {
    pub(crate) fn from_described(d: Described, owner: Owner) -> Self {
        Self {
            data: d.data,
            byte_offset: d.byte_offset,
            device: d.device,
            dtype: d.dtype,
            layout: d.layout,
            readonly: d.readonly,
            is_copied: d.is_copied,
            subbyte_padded: d.subbyte_padded,
            owner,
        }
    }

    /// A host tensor that owns `values`, C-contiguous with `shape`.
    ///
    /// ```
    /// let t = dlbridge::Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!(t.shape(), &[2, 3]);
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn from_vec<T: Element>(values: Vec<T>, shape: &[usize]) -> Result<Self> {
        // Element promises this; checked so that a wrong promise cannot make the tensor claim
        // more bytes than the vector holds.
        let size = std::mem::size_of::<T>();
        if size != T::DTYPE.itemsize() {
            return Err(Error::InvalidArgument(format!(
                "a Rust type of {size} bytes cannot hold {} items of {} bytes",
                T::DTYPE,
                T::DTYPE.itemsize()
            )));
        }
        let layout = Layout::contiguous_usize(shape, size)?;
        if layout.size() != values.len() {
            return Err(Error::InvalidArgument(format!(
                "shape {shape:?} holds {} elements but {} were given",
                layout.size(),
                values.len()
            )));
        }
        let mut values = Arc::new(values);
        // Derived after the move into the owner, through a unique borrow: the pointer carries
        // write permission for the writes a mutable consumer makes later.
        let data = Arc::get_mut(&mut values)
            .expect("a new Arc is unique")
            .as_mut_ptr()
            .cast::<c_void>();
        Ok(Self {
            data,
            byte_offset: 0,
            device: Device::CPU,
            dtype: T::DTYPE,
            layout,
            readonly: false,
            is_copied: true,
            subbyte_padded: false,
            owner: values,
        })
    }

    /// Describe memory that `owner` keeps alive.
    ///
    /// # Safety
    /// For as long as `owner` lives, `data + byte_offset` plus every element offset of `layout`
    /// (times the item size of `dtype`) must address valid, initialised memory of `device`,
    /// writable unless `flags.readonly` is set. `flags.copied` claims that nobody else aliases
    /// the memory (a tensor that has it may be made writable,
    /// [`Tensor::into_writable_if_copied`]): with it set, the memory must be writable and aliased by
    /// no one outside `owner`.
    pub unsafe fn from_raw_parts(
        data: *mut c_void,
        byte_offset: u64,
        device: Device,
        dtype: DType,
        layout: Layout,
        flags: TensorFlags,
        owner: Owner,
    ) -> Result<Self> {
        let reach = layout.reach();
        // SAFETY: the caller's contract, and `reach` is the layout's own.
        unsafe {
            Self::with_reach(
                data,
                byte_offset,
                device,
                dtype,
                layout,
                reach,
                flags,
                owner,
            )
        }
    }

    /// [`Tensor::from_raw_parts`] for a caller that validated the layout with its reach
    /// ([`Layout::with_reach`]), which is then not computed again.
    ///
    /// # Safety
    /// As for [`Tensor::from_raw_parts`]; `reach` must be `layout`'s.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) unsafe fn with_reach(
        data: *mut c_void,
        byte_offset: u64,
        device: Device,
        dtype: DType,
        layout: Layout,
        reach: Reach,
        flags: TensorFlags,
        owner: Owner,
    ) -> Result<Self> {
        if layout.size() > 0 {
            if data.is_null() {
                return Err(null_data());
            }
            if device.is_host_accessible() {
                check_address_range(data as usize, byte_offset, reach, dtype.itemsize())?;
            }
        }
        Ok(Self {
            data,
            byte_offset,
            device,
            dtype,
            layout,
            readonly: flags.readonly,
            is_copied: flags.copied,
            subbyte_padded: false,
            owner,
        })
    }

    /// The base pointer as received (may be an opaque handle on some devices).
    pub fn raw_data(&self) -> *mut c_void {
        self.data
    }
    /// Bytes from [`Tensor::raw_data`] to the first element.
    pub fn byte_offset(&self) -> u64 {
        self.byte_offset
    }
    /// Address of the first element: `data + byte_offset`.
    pub fn data_ptr(&self) -> usize {
        (self.data as usize).wrapping_add(self.byte_offset as usize)
    }
    /// Where the memory lives.
    pub fn device(&self) -> Device {
        self.device
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Shape and strides.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// Extents.
    pub fn shape(&self) -> &[i64] {
        self.layout.shape()
    }
    /// Strides in elements.
    pub fn strides(&self) -> &[i64] {
        self.layout.strides()
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.layout.ndim()
    }
    /// Number of elements.
    pub fn size(&self) -> usize {
        self.layout.size()
    }
    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        self.dtype.itemsize()
    }
    /// Bytes the elements occupy (packed for sub-byte dtypes unless padded).
    pub fn nbytes(&self) -> usize {
        if self.dtype.is_subbyte() && !self.subbyte_padded {
            self.dtype.packed_nbytes(self.size()).unwrap_or(usize::MAX)
        } else {
            self.size() * self.itemsize()
        }
    }
    /// True when the memory must not be written through this tensor.
    pub fn is_readonly(&self) -> bool {
        self.readonly
    }
    /// True when the memory is a copy made for this tensor, aliased by no one else.
    pub fn is_copied(&self) -> bool {
        self.is_copied
    }
    /// True for sub-byte dtypes stored one element per byte.
    pub fn is_subbyte_padded(&self) -> bool {
        self.subbyte_padded
    }
    /// Row-major dense.
    pub fn is_c_contiguous(&self) -> bool {
        self.layout.is_c_contiguous()
    }
    /// Column-major dense.
    pub fn is_f_contiguous(&self) -> bool {
        self.layout.is_f_contiguous()
    }
    /// True when the first element's address is a multiple of the item size (capped at 16).
    pub fn is_aligned(&self) -> bool {
        let align = self.itemsize().clamp(1, 16);
        self.size() == 0 || self.data_ptr().is_multiple_of(align)
    }
    /// The owner keeping the memory alive. Crate-private: a public `&Owner` would let safe
    /// code keep a second owner (a clone or an `Arc::downgrade`) that the uniqueness checks of
    /// [`Tensor::check_exclusive`] and [`Tensor::export_owned`] cannot see once it is upgraded.
    pub(crate) fn owner(&self) -> &Owner {
        &self.owner
    }

    /// True when no other owner of this tensor's memory exists, strong or weak: no clone, view
    /// or export of this tensor, and no `Weak` that could become one later (`Arc::get_mut`
    /// counts both, atomically with respect to other threads).
    pub(crate) fn owner_is_unique(&mut self) -> bool {
        Arc::get_mut(&mut self.owner).is_some()
    }

    /// The same memory, marked read-only.
    pub fn into_readonly(mut self) -> Self {
        self.readonly = true;
        self
    }

    /// The same memory with sub-byte elements stored one per byte (DLPack's
    /// `IS_SUBBYTE_TYPE_PADDED`), as ml_dtypes stores its float4 and float6 arrays. The caller
    /// described the memory with one byte per element; other dtypes are returned unchanged.
    #[cfg(feature = "pyo3")] // for the NumPy import of ml_dtypes arrays
    pub(crate) fn into_subbyte_padded(mut self) -> Self {
        self.subbyte_padded = self.dtype.is_subbyte();
        self
    }

    /// The same memory read as `dtype`, which must have the same item size (e.g. `uint16` bytes
    /// as `bfloat16`); flags and layout are kept. Packed sub-byte types are refused.
    pub fn view_as(&self, dtype: DType) -> Result<Self> {
        if dtype.itemsize() != self.itemsize() || dtype.is_subbyte() || self.dtype.is_subbyte() {
            return Err(Error::InvalidArgument(format!(
                "cannot view {} ({} bytes per element) as {dtype} ({} bytes per element)",
                self.dtype,
                self.itemsize(),
                dtype.itemsize()
            )));
        }
        let mut view = self.clone();
        view.dtype = dtype;
        Ok(view)
    }

    /// The tensor of fresh memory that an array library copied for dlbridge (memory dlbridge
    /// cannot copy itself): marked `is_copied` and writable, as dlbridge's own copies are, since
    /// nothing else aliases it.
    #[cfg(feature = "pyo3")]
    pub(crate) fn into_copied(mut self) -> Self {
        self.is_copied = true;
        self.readonly = false;
        self
    }

    /// A copy that no one else aliases (`is_copied`) made writable: the consumer of a fresh
    /// copy owns it alone, whatever the source's read-only status was. Other tensors are
    /// returned unchanged.
    pub fn into_writable_if_copied(mut self) -> Self {
        if self.is_copied {
            self.readonly = false;
        }
        self
    }

    /// The tensor's elements as a slice, when it is a C-contiguous, aligned host tensor of `T`.
    ///
    /// # When other threads write the memory
    /// The slice is a shared borrow: Rust assumes that nothing writes these elements while it
    /// lives. dlbridge never does (it writes only through `&mut` views, given to a sole owner,
    /// and through `unsafe` copies), but a writable tensor's memory may also be reachable from
    /// Python: the producer's array, when it was imported without a copy, or an array a
    /// consumer made from an export of it. Python code that writes that array from another
    /// thread while the slice lives races with these reads, and the values read are then not
    /// defined: on a free-threaded interpreter such a thread runs at any moment; with the GIL,
    /// whenever this thread releases it (`Python::detach`) or runs Python code. Python gives
    /// arrays no lock, so this is the caller's to rule out, as with NumPy's own C API: when
    /// another thread may write the array, import a copy (`copy=True`, [`Tensor::copy`]),
    /// which nothing else can reach. The read-only flag only says that this tensor may not be
    /// written: another view of the same memory may be writable. Memory a tensor owns as a
    /// copy ([`Tensor::is_copied`]) is written by no one else unless it was exported writable.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_view::<T>()?;
        self.check_c_contiguous()?;
        if self.size() == 0 {
            return Ok(&[]);
        }
        // `check_view` made sure the memory is host-accessible, holds `T::DTYPE` items of
        // exactly `size_of::<T>()` bytes each, starts at an address aligned for `T`, and that
        // `size` items span at most `isize::MAX` bytes; every bit pattern is a valid `T`
        // (Element's contract).
        // SAFETY: being C-contiguous, the layout reaches exactly `size` consecutive such items
        // from the first, all valid while `self` (and so its owner) lives.
        Ok(unsafe { std::slice::from_raw_parts(self.first_element().cast::<T>(), self.size()) })
    }

    /// The tensor's elements as a mutable slice, when it is a C-contiguous, aligned host tensor
    /// of `T` whose memory this tensor alone can reach (see [`Tensor::check_exclusive`]).
    ///
    /// ```
    /// use dlbridge::Tensor;
    ///
    /// let mut t = Tensor::from_vec(vec![1i32, 2, 3], &[3])?;
    /// t.as_slice_mut::<i32>()?[1] = 20;
    /// assert_eq!(t.as_slice::<i32>()?, &[1, 20, 3]);
    /// // A clone shares the memory: neither may be borrowed mutably while both live.
    /// let mut shared = t.clone();
    /// assert!(shared.as_slice_mut::<i32>().is_err());
    /// drop(t);
    /// assert!(shared.as_slice_mut::<i32>().is_ok());
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn as_slice_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check_exclusive()?;
        // SAFETY: the memory is reachable through no other tensor or export while `self` is
        // borrowed mutably, and no one outside the owner aliases it (`check_exclusive`).
        unsafe { self.as_slice_mut_unchecked() }
    }

    /// [`Tensor::as_slice_mut`] without the exclusivity check: for writable memory that others
    /// can reach (a producer's array written in place), when the caller knows nothing else
    /// reads or writes it meanwhile. Read-only memory is still refused ([`Error::ReadOnly`]),
    /// as are the other dtype, layout and alignment errors of `as_slice_mut`.
    ///
    /// # Safety
    /// While the returned slice lives, no other reference, view or thread reads or writes
    /// these elements: not the producer (e.g. Python code holding the array, in another thread
    /// or called from this one), not another import or clone of the same memory. Python gives
    /// arrays no lock: on a free-threaded interpreter another thread may run Python code at
    /// any moment, and with the GIL whenever this thread releases it, so the caller knows who
    /// else holds the array (e.g. a buffer it made itself) or imports a copy instead.
    pub unsafe fn as_slice_mut_unchecked<T: Element>(&mut self) -> Result<&mut [T]> {
        if self.readonly {
            return Err(Error::ReadOnly);
        }
        self.check_view::<T>()?;
        self.check_c_contiguous()?;
        if self.size() == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as in `as_slice` for the extent, alignment and validity of the items; the
        // memory is writable, and the caller promises no other access while the slice lives.
        let items = unsafe {
            std::slice::from_raw_parts_mut(self.first_element().cast::<T>(), self.size())
        };
        Ok(items)
    }

    /// Succeeds when mutable access through `&mut self` cannot alias anything: the memory is
    /// writable ([`Error::ReadOnly`] otherwise), it is a copy made for this tensor
    /// ([`Tensor::is_copied`]: tensors from [`Tensor::from_vec`], [`Tensor::zeros`], copies,
    /// owned `ndarray` arrays, or a producer's copy), and no clone, view or export of this
    /// tensor is alive (its owner is not shared) — [`Error::Aliased`] otherwise.
    ///
    /// Memory imported from a producer without a copy (a NumPy array passed to a PyO3
    /// function, say) is refused even when writable: the producer and other imports of the same
    /// array still see it, and Rust's `&mut` promises that nothing else does.
    pub fn check_exclusive(&mut self) -> Result<()> {
        if self.readonly {
            return Err(Error::ReadOnly);
        }
        if !self.is_copied {
            return Err(Error::Aliased {
                reason: "it belongs to the producer, which still sees it; make a copy to own it"
                    .to_owned(),
            });
        }
        if !self.owner_is_unique() {
            return Err(Error::Aliased {
                reason: "a clone, view or export of this tensor is alive".to_owned(),
            });
        }
        Ok(())
    }

    /// Every element, read as `T`, in row-major (logical C) order, whatever the strides
    /// (negative and zero strides included). Checks as [`Tensor::to_vec`] does.
    ///
    /// ```
    /// use dlbridge::Tensor;
    ///
    /// let t = Tensor::from_vec((0..6).collect::<Vec<i64>>(), &[2, 3])?;
    /// let columns_first: Vec<i64> = t.transposed().iter::<i64>()?.collect();
    /// assert_eq!(columns_first, [0, 3, 1, 4, 2, 5]);
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn iter<T: Element>(&self) -> Result<Elements<'_, T>> {
        self.check_view::<T>()?;
        Ok(Elements {
            first: self.first_element().cast::<T>().cast_const(),
            shape: self.shape(),
            strides: self.strides(),
            index: vec![0; self.ndim()],
            offset: 0,
            remaining: self.size(),
        })
    }

    /// The address of the first element, with the provenance of the received pointer.
    pub(crate) fn first_element(&self) -> *mut u8 {
        self.data
            .cast::<u8>()
            .wrapping_add(self.byte_offset as usize)
    }

    /// The bytes of a C-contiguous, host-accessible tensor (padded or packed as stored).
    pub fn host_bytes(&self) -> Result<&[u8]> {
        self.device.require_host()?;
        self.check_c_contiguous()?;
        if self.nbytes() == 0 {
            return Ok(&[]);
        }
        // SAFETY: host-accessible, C-contiguous memory of `nbytes` bytes starting at the first
        // element, valid while `self` (and so its owner) lives.
        Ok(unsafe { std::slice::from_raw_parts(self.first_element(), self.nbytes()) })
    }

    /// Every element in row-major order, copied out (any strides).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_view::<T>()?;
        let mut out = Vec::with_capacity(self.size());
        crate::layout::for_each_offset(&self.layout, |offset| {
            // SAFETY: the layout was validated against this memory; `offset` is an element
            // offset it reaches, the data is host-accessible, the items are `size_of::<T>()`
            // bytes and the first is aligned for T (check_view), so every reached one is too.
            out.push(unsafe { *self.first_element().cast::<T>().offset(offset as isize) });
        });
        Ok(out)
    }

    /// The checks every typed view makes before reading memory as `T`: host memory, the dtype
    /// `T` names, one `T` per stored item, and a first element aligned for `T`. Size and
    /// alignment are checked although [`Element`] promises them, so that a wrong promise is an
    /// error rather than an out-of-bounds or misaligned read.
    pub(crate) fn check_view<T: Element>(&self) -> Result<()> {
        self.device.require_host()?;
        if self.dtype != T::DTYPE {
            return Err(Error::WrongDType {
                held: self.dtype.name(),
                asked: T::DTYPE.name(),
            });
        }
        // One `T` per stored item, and the items no more than `isize::MAX` bytes (a slice's
        // limit); packed sub-byte items fail here, their bytes being fewer than their items.
        let size = std::mem::size_of::<T>();
        let bytes = self.size().checked_mul(size);
        if size != self.itemsize()
            || bytes != Some(self.nbytes())
            || self.nbytes() > isize::MAX as usize
        {
            return Err(Error::InvalidArgument(format!(
                "a Rust type of {size} bytes cannot view the {} items of this tensor ({} items in {} bytes)",
                self.dtype,
                self.size(),
                self.nbytes()
            )));
        }
        let align = std::mem::align_of::<T>();
        if !self.is_aligned() || self.size() > 0 && !self.data_ptr().is_multiple_of(align) {
            return Err(Error::Misaligned {
                align,
                type_name: std::any::type_name::<T>(),
            });
        }
        Ok(())
    }

    /// [`Error::NotContiguous`] unless the tensor is C-contiguous.
    fn check_c_contiguous(&self) -> Result<()> {
        if self.is_c_contiguous() {
            return Ok(());
        }
        Err(Error::NotContiguous {
            shape: self.shape().to_vec(),
            strides: self.strides().to_vec(),
        })
    }
}

/// The elements of a tensor in row-major order ([`Tensor::iter`]); borrows the tensor.
pub struct Elements<'a, T> {
    first: *const T,
    shape: &'a [i64],
    strides: &'a [i64],
    index: Vec<i64>,
    offset: i64,
    remaining: usize,
}

// SAFETY: the iterator only reads `T`s (which are Send + Sync, Element's bounds) of memory the
// borrowed tensor keeps alive; the tensor itself is Send + Sync.
unsafe impl<T: Element> Send for Elements<'_, T> {}
// SAFETY: see above; `&Elements` allows no reads at all.
unsafe impl<T: Element> Sync for Elements<'_, T> {}

impl<T: Element> Iterator for Elements<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.remaining == 0 {
            return None;
        }
        // SAFETY: `Tensor::iter` checked the memory is host-accessible, of `T`s, aligned; the
        // layout was validated against that memory, and `offset` is the element offset of an
        // index within the shape (stepped below within each extent only).
        let value = unsafe { self.first.offset(self.offset as isize).read() };
        self.remaining -= 1;
        for d in (0..self.shape.len()).rev() {
            if self.index[d] + 1 < self.shape[d] {
                self.index[d] += 1;
                self.offset += self.strides[d];
                break;
            }
            self.offset -= self.strides[d] * self.index[d];
            self.index[d] = 0;
        }
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T: Element> ExactSizeIterator for Elements<'_, T> {}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .field("dtype", &self.dtype.name())
            .field("device", &self.device.to_string())
            .field("readonly", &self.readonly)
            .field("is_copied", &self.is_copied)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_reinterpret_same_sized_items() {
        let t = Tensor::from_vec(vec![0x3f80u16, 0x4000], &[2]).unwrap();
        let bf = t.view_as(DType::BFLOAT16).unwrap();
        assert_eq!(
            bf.to_vec::<half::bf16>().unwrap(),
            vec![half::bf16::from_f32(1.0), half::bf16::from_f32(2.0)]
        );
        assert_eq!(bf.data_ptr(), t.data_ptr());
        assert!(t.view_as(DType::FLOAT32).is_err());
        assert!(
            t.view_as(DType::from_name("float4_e2m1fn").unwrap())
                .is_err()
        );
    }

    #[test]
    fn zeros_are_zero_and_writable() {
        let t = Tensor::zeros(DType::FLOAT64, &[2, 3]).unwrap();
        assert_eq!(t.to_vec::<f64>().unwrap(), vec![0.0; 6]);
        assert!(!t.is_readonly() && t.is_c_contiguous());
        let fp4 = DType::from_name("float4_e2m1fn").unwrap();
        assert_eq!(Tensor::zeros(fp4, &[3]).unwrap().nbytes(), 2);
    }

    #[test]
    fn from_vec_and_views() {
        let t = Tensor::from_vec((0..12).map(|x| x as f32).collect(), &[3, 4]).unwrap();
        assert_eq!(t.shape(), &[3, 4]);
        assert_eq!(t.strides(), &[4, 1]);
        assert_eq!(t.as_slice::<f32>().unwrap()[5], 5.0);
        assert!(t.as_slice::<f64>().is_err());
        assert!(Tensor::from_vec(vec![1u8, 2, 3], &[2, 2]).is_err());
        assert_eq!(t.nbytes(), 48);
        assert!(t.is_copied() && !t.is_readonly());
    }

    /// 32 bytes that claim to be one `uint8`: a broken `Element` implementation.
    #[derive(Clone, Copy)]
    struct Big(#[allow(dead_code)] [u8; 32]);
    // SAFETY: deliberately false (the size is not uint8's), to show the views refuse it.
    unsafe impl Element for Big {
        const DTYPE: DType = DType::UINT8;
    }

    /// A one-byte value aligned to 64 bytes (so 64 bytes large) that claims to be a `uint8`.
    #[derive(Clone, Copy)]
    #[repr(align(64))]
    struct Aligned64(#[allow(dead_code)] u8);
    // SAFETY: deliberately false (size and alignment are not uint8's), as above.
    unsafe impl Element for Aligned64 {
        const DTYPE: DType = DType::UINT8;
    }

    #[test]
    fn views_refuse_a_type_of_another_size_or_alignment() {
        let t = Tensor::from_vec(vec![1u8, 2, 3], &[3]).unwrap();
        for err in [
            t.as_slice::<Big>().err(),
            t.to_vec::<Big>().err(),
            t.as_slice::<Aligned64>().err(),
            t.to_vec::<Aligned64>().err(),
        ] {
            assert!(
                matches!(&err, Some(Error::InvalidArgument(m)) if m.contains("cannot view the uint8 items")),
                "{err:?}"
            );
        }
        assert_eq!(t.as_slice::<u8>().unwrap(), &[1, 2, 3]);
        let wrong = Tensor::from_vec(vec![Big([0; 32])], &[1]);
        assert!(
            matches!(&wrong, Err(Error::InvalidArgument(m)) if m.contains("cannot hold uint8")),
            "{wrong:?}"
        );
    }

    #[test]
    fn views_refuse_misaligned_data() {
        let bytes = Tensor::from_vec(vec![0u64; 3], &[3]).unwrap();
        // SAFETY: 16 bytes from byte 1 of a 24-byte buffer that `owner` keeps alive, writable.
        let shifted = unsafe {
            Tensor::from_raw_parts(
                bytes.raw_data(),
                1,
                Device::CPU,
                DType::FLOAT64,
                Layout::contiguous(&[2], 8).unwrap(),
                TensorFlags::WRITABLE,
                bytes.owner().clone(),
            )
        }
        .unwrap();
        assert!(matches!(
            shifted.as_slice::<f64>(),
            Err(Error::Misaligned { align: 8, .. })
        ));
        assert!(matches!(
            shifted.to_vec::<f64>(),
            Err(Error::Misaligned { .. })
        ));
    }

    #[test]
    fn from_vec_memory_is_writable_through_its_data_pointer() {
        let t = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
        let data = t.raw_data().cast::<i32>();
        // SAFETY: `t` alone owns the vector (is_copied, writable) and no view of it is alive;
        // the pointer was derived with write permission after the vector moved into its owner.
        unsafe { data.add(1).write(20) };
        assert_eq!(t.as_slice::<i32>().unwrap(), &[1, 20, 3]);
    }

    #[test]
    fn mutable_slices_need_exclusive_writable_memory() {
        let mut t = Tensor::from_vec(vec![1u16, 2, 3, 4], &[2, 2]).unwrap();
        t.as_slice_mut::<u16>().unwrap()[3] = 40;
        assert_eq!(t.to_vec::<u16>().unwrap(), vec![1, 2, 3, 40]);
        assert!(matches!(
            t.as_slice_mut::<i16>(),
            Err(Error::WrongDType { .. })
        ));

        let view = t.clone();
        assert!(matches!(
            t.as_slice_mut::<u16>(),
            Err(Error::Aliased { .. })
        ));
        drop(view);
        let mut readonly = t.into_readonly();
        assert!(matches!(
            readonly.as_slice_mut::<u16>(),
            Err(Error::ReadOnly)
        ));

        // Memory that is not the tensor's own copy, even writable and unshared.
        let bytes = Tensor::from_vec(vec![0u8; 4], &[4]).unwrap();
        // SAFETY: 4 writable bytes that `owner` keeps alive; not a copy (is_copied false).
        let mut foreign = unsafe {
            Tensor::from_raw_parts(
                bytes.raw_data(),
                0,
                Device::CPU,
                DType::UINT8,
                Layout::contiguous(&[4], 1).unwrap(),
                TensorFlags::WRITABLE,
                Arc::new(bytes),
            )
        }
        .unwrap();
        assert!(matches!(
            foreign.as_slice_mut::<u8>(),
            Err(Error::Aliased { .. })
        ));

        let mut empty = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap();
        assert_eq!(empty.as_slice_mut::<f32>().unwrap().len(), 0);
    }

    #[test]
    fn elements_follow_row_major_order_for_any_strides() {
        let t = Tensor::from_vec((0..12).collect::<Vec<i32>>(), &[3, 4]).unwrap();
        let flipped = reversed(&t);
        let expected: Vec<i32> = (0..12).rev().collect();
        assert_eq!(flipped.iter::<i32>().unwrap().collect::<Vec<_>>(), expected);
        assert_eq!(flipped.to_vec::<i32>().unwrap(), expected);
        assert_eq!(flipped.iter::<i32>().unwrap().len(), 12);
        assert!(flipped.iter::<f32>().is_err());
        let scalar = Tensor::from_vec(vec![7.5f64], &[]).unwrap();
        assert_eq!(scalar.iter::<f64>().unwrap().collect::<Vec<_>>(), vec![7.5]);
        let empty = Tensor::from_vec(Vec::<u8>::new(), &[2, 0]).unwrap();
        assert_eq!(empty.iter::<u8>().unwrap().count(), 0);
    }

    /// `t` (2-d, C-contiguous) with both axes reversed: negative strides from the last element.
    fn reversed(t: &Tensor) -> Tensor {
        let (rows, cols) = (t.shape()[0], t.shape()[1]);
        let last = ((rows * cols - 1) as usize * t.itemsize()) as u64;
        // SAFETY: the same memory, read from the last element backwards: every offset the
        // negative strides reach lies inside the original's span; kept alive by its owner.
        unsafe {
            Tensor::from_raw_parts(
                t.raw_data(),
                last,
                t.device(),
                t.dtype(),
                Layout::new(&[rows, cols], Some(&[-cols, -1]), t.itemsize()).unwrap(),
                TensorFlags::READONLY,
                t.owner().clone(),
            )
        }
        .unwrap()
    }
}
