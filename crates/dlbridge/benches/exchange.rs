//! The Rust side of one DLPack exchange, without Python: export a 16-element float32 tensor as
//! a managed tensor (versioned and legacy), import it back, and drop it (deleter included).
//! The Python figures are in `benches/results/exchange.md`; this is the floor under them.
//!
//! Run with `cargo bench -p dlbridge --bench exchange`.

use dlbridge::{Flavor, Tensor};

fn main() {
    divan::main();
}

fn small(shape: &[usize]) -> Tensor {
    let n = shape.iter().product::<usize>();
    Tensor::from_vec((0..n).map(|i| i as f32).collect(), shape).expect("valid shape")
}

/// Export (one allocation), import (validation), drop (deleter): versioned, 1-D.
#[divan::bench]
fn round_trip_versioned_1d(bencher: divan::Bencher) {
    let t = small(&[16]);
    bencher.bench_local(|| {
        let managed = t.export(Flavor::Versioned { minor: 3 }).expect("export");
        Tensor::from_managed(managed).expect("import")
    });
}

/// The same through a legacy capsule's struct.
#[divan::bench]
fn round_trip_legacy_1d(bencher: divan::Bencher) {
    let t = small(&[16]);
    bencher.bench_local(|| {
        let managed = t.export(Flavor::Legacy).expect("export");
        Tensor::from_managed(managed).expect("import")
    });
}

/// A 4-d tensor: shape and strides no longer fit inline in the tensor's layout.
#[divan::bench]
fn round_trip_versioned_4d(bencher: divan::Bencher) {
    let t = small(&[1, 2, 2, 4]);
    bencher.bench_local(|| {
        let managed = t.export(Flavor::Versioned { minor: 3 }).expect("export");
        Tensor::from_managed(managed).expect("import")
    });
}

/// Export alone (and the deleter when the managed tensor is dropped).
#[divan::bench]
fn export_versioned_1d(bencher: divan::Bencher) {
    let t = small(&[16]);
    bencher.bench_local(|| t.export(Flavor::Versioned { minor: 3 }).expect("export"));
}
