//! Host copy kernels: contiguous copies, transposes and reversed views, by element size.
//!
//! Run with `cargo bench -p dlbridge --bench copy`.

use dlbridge::{Order, Tensor};

fn main() {
    divan::main();
}

/// A C-contiguous `rows` × `cols` tensor of `T`.
fn matrix<T: dlbridge::Element + From<u8>>(rows: usize, cols: usize) -> Tensor {
    let values: Vec<T> = (0..rows * cols).map(|i| T::from((i % 251) as u8)).collect();
    Tensor::from_vec(values, &[rows, cols]).expect("valid shape")
}

/// 64 MiB of float32, contiguous: one memcpy (parallel above the threshold).
#[divan::bench(sample_count = 20)]
fn contiguous_64mib_f32(bencher: divan::Bencher) {
    let t = matrix::<f32>(4096, 4096);
    bencher.bench_local(|| t.copy(Order::C).expect("copy"));
}

/// The transpose of a 4096 × 4096 float32 into C order (`ascontiguousarray(a.T)`).
#[divan::bench(sample_count = 20)]
fn transpose_4096_f32(bencher: divan::Bencher) {
    let t = matrix::<f32>(4096, 4096).transposed();
    bencher.bench_local(|| t.copy(Order::C).expect("copy"));
}

/// Transposes of 16 MiB by element size.
#[divan::bench(types = [u8, u16, f32, u64], sample_count = 20)]
fn transpose_16mib<T: dlbridge::Element + From<u8>>(bencher: divan::Bencher) {
    let side = ((16usize << 20) / std::mem::size_of::<T>()).isqrt();
    let t = matrix::<T>(side, side).transposed();
    bencher.bench_local(|| t.copy(Order::C).expect("copy"));
}

/// Transposes of 16 MiB by element size into an existing C-order tensor (no allocation, no
/// first-touch page faults).
#[divan::bench(types = [u8, u16, f32, u64], sample_count = 20)]
fn transpose_into_16mib<T: dlbridge::Element + From<u8>>(bencher: divan::Bencher) {
    let side = ((16usize << 20) / std::mem::size_of::<T>()).isqrt();
    let src = matrix::<T>(side, side).transposed();
    let dst = matrix::<T>(side, side);
    // SAFETY: nothing else uses `dst` while the benchmark runs.
    bencher.bench_local(|| unsafe { dlbridge::copy::copy_into(&dst, &src) }.expect("copy"));
}

/// A small transpose (no threads): 64 × 64 float64.
#[divan::bench]
fn transpose_small_f64(bencher: divan::Bencher) {
    let t = matrix::<f64>(64, 64).transposed();
    bencher.bench_local(|| t.copy(Order::C).expect("copy"));
}

/// A Fortran-order copy of a C-contiguous 4096 × 4096 float32 (same kernel as a transpose).
#[divan::bench(sample_count = 20)]
fn f_order_4096_f32(bencher: divan::Bencher) {
    let t = matrix::<f32>(4096, 4096);
    bencher.bench_local(|| t.copy(Order::F).expect("copy"));
}

/// The transpose of a 4096 × 4096 float32 into an existing C-order tensor (no allocation,
/// no first-touch page faults).
#[divan::bench(sample_count = 20)]
fn transpose_into_4096_f32(bencher: divan::Bencher) {
    let src = matrix::<f32>(4096, 4096).transposed();
    let dst = matrix::<f32>(4096, 4096);
    // SAFETY: nothing else uses `dst` while the benchmark runs.
    bencher.bench_local(|| unsafe { dlbridge::copy::copy_into(&dst, &src) }.expect("copy"));
}

/// A contiguous 64 MiB float32 copy into an existing tensor.
#[divan::bench(sample_count = 20)]
fn contiguous_into_64mib_f32(bencher: divan::Bencher) {
    let src = matrix::<f32>(4096, 4096);
    let dst = matrix::<f32>(4096, 4096);
    // SAFETY: nothing else uses `dst` while the benchmark runs.
    bencher.bench_local(|| unsafe { dlbridge::copy::copy_into(&dst, &src) }.expect("copy"));
}

/// An L2-resident transpose (256 KiB), repeated, by element size: the kernel's compute cost.
#[divan::bench(types = [u8, u16, f32, u64])]
fn transpose_into_256kib<T: dlbridge::Element + From<u8>>(bencher: divan::Bencher) {
    let side = ((256usize << 10) / std::mem::size_of::<T>()).isqrt();
    let src = matrix::<T>(side, side).transposed();
    let dst = matrix::<T>(side, side);
    // SAFETY: nothing else uses `dst` while the benchmark runs.
    bencher.bench_local(|| unsafe { dlbridge::copy::copy_into(&dst, &src) }.expect("copy"));
}
