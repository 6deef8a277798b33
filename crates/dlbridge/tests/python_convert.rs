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
