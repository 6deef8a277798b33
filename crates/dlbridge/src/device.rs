//! Devices: the DLPack device type (held as an integer) and ordinal, with names and parsing.

use std::fmt;

use crate::ffi::dlpack::DLDevice;

/// A DLPack device type (`DLDeviceType`), held as an integer so that types from newer producers
/// survive the trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceType(pub i32);

impl DeviceType {
    /// `kDLCPU`
    pub const CPU: Self = Self(1);
    /// `kDLCUDA`
    pub const CUDA: Self = Self(2);
    /// `kDLCUDAHost` (pinned host memory)
    pub const CUDA_HOST: Self = Self(3);
    /// `kDLOpenCL`
    pub const OPENCL: Self = Self(4);
    /// `kDLVulkan`
    pub const VULKAN: Self = Self(7);
    /// `kDLMetal`
    pub const METAL: Self = Self(8);
    /// `kDLVPI`
    pub const VPI: Self = Self(9);
    /// `kDLROCM`
    pub const ROCM: Self = Self(10);
    /// `kDLROCMHost` (pinned host memory)
    pub const ROCM_HOST: Self = Self(11);
    /// `kDLExtDev`
    pub const EXT_DEV: Self = Self(12);
    /// `kDLCUDAManaged` (unified memory)
    pub const CUDA_MANAGED: Self = Self(13);
    /// `kDLOneAPI`
    pub const ONEAPI: Self = Self(14);
    /// `kDLWebGPU`
    pub const WEBGPU: Self = Self(15);
    /// `kDLHexagon`
    pub const HEXAGON: Self = Self(16);
    /// `kDLMAIA`
    pub const MAIA: Self = Self(17);
    /// `kDLTrn`
    pub const TRN: Self = Self(18);
    /// `kDLTPU` (added to the header after DLPack 1.3, with the minor version still 3)
    pub const TPU: Self = Self(19);
    /// `kDLTPUHost`: pinned host memory of a TPU runtime (added after DLPack 1.3)
    pub const TPU_HOST: Self = Self(20);
    /// `kDLAscend`: memory of a Huawei Ascend NPU (added after DLPack 1.3)
    pub const ASCEND: Self = Self(21);

    pub(crate) const NAMES: [(Self, &'static str); 19] = [
        (Self::CPU, "cpu"),
        (Self::CUDA, "cuda"),
        (Self::CUDA_HOST, "cuda_host"),
        (Self::OPENCL, "opencl"),
        (Self::VULKAN, "vulkan"),
        (Self::METAL, "metal"),
        (Self::VPI, "vpi"),
        (Self::ROCM, "rocm"),
        (Self::ROCM_HOST, "rocm_host"),
        (Self::EXT_DEV, "ext_dev"),
        (Self::CUDA_MANAGED, "cuda_managed"),
        (Self::ONEAPI, "oneapi"),
        (Self::WEBGPU, "webgpu"),
        (Self::HEXAGON, "hexagon"),
        (Self::MAIA, "maia"),
        (Self::TRN, "trn"),
        (Self::TPU, "tpu"),
        (Self::TPU_HOST, "tpu_host"),
        (Self::ASCEND, "ascend"),
    ];

    /// The name (`"cpu"`, `"cuda"`, ...), or `None` for a type this version does not know.
    pub fn name(self) -> Option<&'static str> {
        Self::NAMES
            .iter()
            .find(|(t, _)| *t == self)
            .map(|(_, n)| *n)
    }

    /// True when the host CPU can read and write the memory directly.
    ///
    /// `kDLTPUHost` is host memory: upstream added it as the TPU mirror of `kDLCUDAHost`
    /// (pinned host RAM that a TPU runtime transfers to and from faster; JAX exports arrays of
    /// its `pinned_host` memory kind with it), while unpinned host memory stays `kDLCPU`.
    /// `kDLTPU` and `kDLAscend` are device memory, like `kDLCUDA`.
    pub fn is_host_accessible(self) -> bool {
        matches!(
            self,
            Self::CPU | Self::CUDA_HOST | Self::ROCM_HOST | Self::CUDA_MANAGED | Self::TPU_HOST
        )
    }
}

/// A device: type and ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// The device type.
    pub kind: DeviceType,
    /// The ordinal (0 for CPU, pinned and managed memory).
    pub id: i32,
}

impl Device {
    /// The host CPU.
    pub const CPU: Self = Self {
        kind: DeviceType::CPU,
        id: 0,
    };

    /// A device of `kind` with ordinal `id`.
    pub const fn new(kind: DeviceType, id: i32) -> Self {
        Self { kind, id }
    }

    /// From the raw `DLDevice`.
    pub fn from_dl(d: DLDevice) -> Self {
        Self {
            kind: DeviceType(d.device_type),
            id: d.device_id,
        }
    }

    /// The raw `DLDevice`.
    pub fn to_dl(self) -> DLDevice {
        DLDevice {
            device_type: self.kind.0,
            device_id: self.id,
        }
    }

    /// True when the host CPU can access the memory directly.
    pub fn is_host_accessible(self) -> bool {
        self.kind.is_host_accessible()
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind.name(), self.kind) {
            (_, DeviceType::CPU) if self.id == 0 => f.write_str("cpu"),
            (Some(name), _) => write!(f, "{name}:{}", self.id),
            (None, DeviceType(code)) => write!(f, "device{code}:{}", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for text in [
            "cpu",
            "cuda:0",
            "cuda:1",
            "oneapi:0",
            "cuda_host:0",
            "tpu:1",
            "tpu_host:0",
            "ascend:2",
            "device42:3",
        ] {
            assert_eq!(text.parse::<Device>().unwrap().to_string(), text);
        }
        assert_eq!(
            "cuda".parse::<Device>().unwrap(),
            Device::new(DeviceType::CUDA, 0)
        );
        assert_eq!("CPU:0".parse::<Device>().unwrap(), Device::CPU);
        for bad in ["", "gpu", "cuda:x", "cuda:-1", "device0", "cuda:1:2"] {
            assert!(bad.parse::<Device>().is_err(), "{bad}");
        }
    }

    #[test]
    fn host_access() {
        assert!(Device::CPU.is_host_accessible());
        assert!(DeviceType::CUDA_MANAGED.is_host_accessible());
        assert!(!DeviceType::CUDA.is_host_accessible());
        assert!(!DeviceType::ONEAPI.is_host_accessible());
        assert!(!DeviceType(99).is_host_accessible());
        // The codes merged after DLPack 1.3: TPU device memory, and its pinned host memory.
        assert!(!DeviceType::TPU.is_host_accessible());
        assert!(DeviceType::TPU_HOST.is_host_accessible());
        assert_eq!(DeviceType(19).name(), Some("tpu"));
        assert_eq!(DeviceType(20).name(), Some("tpu_host"));
        assert!(!DeviceType::ASCEND.is_host_accessible());
        assert_eq!(DeviceType(21).name(), Some("ascend"));
        assert_eq!(DeviceType(22).name(), None);
    }
}
