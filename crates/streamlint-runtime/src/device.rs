//! Finding the GPU. cudarc loads the driver library at run time, so the binary starts on any
//! machine; this module asks whether a driver and a device are there before anything would make
//! cudarc panic over a missing library.

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, DriverError};

/// The device the cases run on.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub name: String,
    /// The CUDA version the driver supports (`13.0`).
    pub cuda: String,
}

/// Why there is no GPU to run on.
#[derive(Debug, PartialEq, Eq)]
pub enum NoGpu {
    /// `libcuda` cannot be loaded: no NVIDIA driver on this machine.
    NoDriver,
    /// The driver is there but sees no device.
    NoDevice,
    /// The driver is there but failed.
    Failed(String),
}

impl fmt::Display for NoGpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoGpu::NoDriver => f.write_str(
                "no NVIDIA driver: the CUDA driver library (libcuda) cannot be loaded, so there is no GPU to run the runtime cases on",
            ),
            NoGpu::NoDevice => f.write_str("no GPU: the NVIDIA driver is loaded but reports no CUDA device"),
            NoGpu::Failed(why) => write!(f, "no usable GPU: the NVIDIA driver failed ({why})"),
        }
    }
}

/// The first GPU, with a context on it.
pub fn probe() -> Result<Gpu, NoGpu> {
    // SAFETY: only tries to open the library; nothing from it is called here.
    if !unsafe { sys::is_culib_present() } {
        return Err(NoGpu::NoDriver);
    }
    let failed = |e: DriverError| {
        if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE {
            NoGpu::NoDevice
        } else {
            NoGpu::Failed(e.to_string())
        }
    };
    if CudaContext::device_count().map_err(failed)? < 1 {
        return Err(NoGpu::NoDevice);
    }
    let ctx = CudaContext::new(0).map_err(failed)?;
    let name = ctx.name().map_err(failed)?;
    let mut version = 0;
    // SAFETY: the driver is initialized (a context exists) and `version` is a valid out pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(failed)?;
    Ok(Gpu {
        ctx,
        name,
        cuda: cuda_version(version),
    })
}

/// `13000` as `13.0`, the way the driver encodes it (1000 × major + 10 × minor).
pub fn cuda_version(encoded: i32) -> String {
    format!("{}.{}", encoded / 1000, (encoded % 1000) / 10)
}

/// The kernel driver's version (`580.159.04`) from the text of `/proc/driver/nvidia/version`.
pub fn driver_version(proc_text: &str) -> Option<String> {
    let line = proc_text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|word| {
            let parts: Vec<&str> = word.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// The kernel driver's version on this machine, or `unknown`.
pub fn local_driver_version() -> String {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| driver_version(&t))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cuda_version_is_major_dot_minor() {
        assert_eq!(cuda_version(13000), "13.0");
        assert_eq!(cuda_version(12080), "12.8");
        assert_eq!(cuda_version(11040), "11.4");
    }

    #[test]
    fn the_driver_version_is_read_from_the_nvrm_line() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (builder@host)  \nGCC version:  gcc version 15.3.0 (GCC) \n";
        assert_eq!(driver_version(open).as_deref(), Some("580.159.04"));
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n";
        assert_eq!(driver_version(proprietary).as_deref(), Some("535.104.05"));
        assert_eq!(driver_version("GCC version: 15.3.0\n"), None);
        assert_eq!(driver_version(""), None);
    }

    #[test]
    fn every_reason_says_what_is_missing() {
        assert!(NoGpu::NoDriver.to_string().contains("no NVIDIA driver"));
        assert!(NoGpu::NoDevice.to_string().contains("no CUDA device"));
        assert!(NoGpu::Failed("CUDA_ERROR_UNKNOWN".into())
            .to_string()
            .contains("CUDA_ERROR_UNKNOWN"));
    }
}
