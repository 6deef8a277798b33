//! `Tensor` as a PyO3 argument and return value (feature "pyo3"), with a real interpreter:
//! extraction imports like `dlbridge.from_dlpack`, and the returned object is a working
//! `Tensor` (DLPack, buffer protocol) even in a module that never called `register`.
#![cfg(feature = "pyo3")]

use dlbridge::{DType, Tensor};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

#[test]
fn extract_imports_and_into_pyobject_returns_a_tensor() {
    Python::initialize();
    Python::attach(|py| {
        let source = PyByteArray::new(py, &[1, 2, 3, 4]);
        let address = source.data() as usize;
        let tensor: Tensor = source.extract().unwrap();
        assert_eq!(tensor.shape(), &[4]);
        assert_eq!(tensor.dtype(), DType::UINT8);
        assert_eq!(tensor.data_ptr(), address, "imported without a copy");

        let obj = tensor.clone().into_pyobject(py).unwrap().into_any();
        assert_eq!(obj.get_type().name().unwrap(), "Tensor");
        let capsule = obj.call_method0("__dlpack__").unwrap();
        assert_eq!(capsule.get_type().name().unwrap(), "PyCapsule");
        let bytes = py
            .import("builtins")
            .unwrap()
            .call_method1("bytes", (&obj,))
            .unwrap();
        assert_eq!(bytes.cast::<PyBytes>().unwrap().as_bytes(), &[1, 2, 3, 4]);

        let back: Tensor = obj.extract().unwrap();
        assert_eq!(
            back.data_ptr(),
            address,
            "a Tensor object is taken as it is"
        );
    });
}

#[test]
fn extract_refuses_what_is_not_an_array() {
    Python::initialize();
    Python::attach(|py| {
        let err = 5i32
            .into_pyobject(py)
            .unwrap()
            .extract::<Tensor>()
            .unwrap_err();
        assert!(err.is_instance_of::<PyTypeError>(py), "{err}");
    });
}

#[test]
fn writable_arguments_are_the_callers_memory() {
    use dlbridge::python::{HostTensor, Import, WritableTensor};
    use pyo3::exceptions::PyBufferError;
    Python::initialize();
    Python::attach(|py| {
        let source = PyByteArray::new(py, &[1, 2, 3]);
        let mut arg: WritableTensor = source.extract().unwrap();
        // The caller's array still sees the memory: the safe view refuses it.
        assert!(matches!(
            arg.as_slice_mut::<u8>(),
            Err(dlbridge::Error::Aliased { .. })
        ));
        // SAFETY: the bytearray was made just above and no other thread has a reference to
        // it; nothing else views it during the write.
        unsafe { arg.as_slice_mut_unchecked::<u8>() }.unwrap()[0] = 10;
        assert_eq!(source.to_vec(), [10, 2, 3], "written in place");

        let frozen = PyBytes::new(py, &[1, 2, 3]);
        let err = frozen.extract::<WritableTensor>().unwrap_err();
        assert!(err.is_instance_of::<PyBufferError>(py), "{err}");
        assert!(err.to_string().contains("read-only"), "{err}");
        assert!(err.to_string().contains("numpy.array(x)"), "{err}");
        // Read access and a fresh copy both take read-only memory.
        let host: HostTensor = frozen.extract().unwrap();
        assert_eq!(host.as_slice::<u8>().unwrap(), &[1, 2, 3]);
        let copy = Import {
            copy: Some(true),
            writable: true,
            ..Import::default()
        };
        let mut scratch = copy.extract(frozen.as_any()).unwrap();
        scratch.as_slice_mut::<u8>().unwrap()[0] = 9;
        assert_eq!(frozen.as_bytes(), &[1, 2, 3]);
    });
}

#[test]
fn writable_arguments_refuse_what_needs_a_copy() {
    use dlbridge::python::{Import, WritableTensor};
    use pyo3::exceptions::PyBufferError;
    Python::initialize();
    Python::attach(|py| {
        // One float64 one byte into a bytearray: misaligned, so usable only through a copy.
        let misaligned = py
            .eval(c"memoryview(bytearray(9))[1:].cast('d')", None, None)
            .unwrap();
        let err = misaligned.extract::<WritableTensor>().unwrap_err();
        assert!(err.is_instance_of::<PyBufferError>(py), "{err}");
        assert!(err.to_string().contains("written in place"), "{err}");
        // Read access realigns it with a copy (copy=None).
        let read = Import::default().extract(&misaligned).unwrap();
        assert!(read.is_copied() && read.is_aligned());
    });
}

#[test]
fn works_without_the_dlbridge_package() {
    Python::initialize();
    Python::attach(|py| {
        let sys = py.import("sys").unwrap();
        let modules = sys.getattr("modules").unwrap();
        let saved = modules.get_item("dlbridge").ok();
        // `import dlbridge` now raises ImportError, whatever is installed.
        modules.set_item("dlbridge", py.None()).unwrap();
        assert!(py.import("dlbridge").is_err());

        let t = Tensor::from_vec(vec![1.5f64, 2.5], &[2]).unwrap();
        let obj = t.into_pyobject(py).unwrap().into_any();
        let view = py
            .import("builtins")
            .unwrap()
            .getattr("memoryview")
            .unwrap()
            .call1((&obj,))
            .unwrap();
        assert_eq!(
            view.call_method0("tolist")
                .unwrap()
                .extract::<Vec<f64>>()
                .unwrap(),
            [1.5, 2.5]
        );
        let capsule = obj.call_method0("__dlpack__").unwrap();
        let back: Tensor = capsule.extract().unwrap();
        assert_eq!(back.as_slice::<f64>().unwrap(), &[1.5, 2.5]);

        match saved {
            Some(m) => modules.set_item("dlbridge", m).unwrap(),
            None => modules.del_item("dlbridge").unwrap(),
        }
    });
}
