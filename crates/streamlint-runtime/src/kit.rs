//! What the Rust runtime cases are built from: three kernels written as PTX text (so no CUDA
//! compiler is needed, here or on the GPU machine: the driver compiles them when they load), raw
//! launchers for them in the style of a kernel library's FFI (a stream handle and raw device
//! pointers), and the parameters of one trial.
//!
//! The launchers take raw pointers on purpose: a case hands them pointers it got from cudarc's
//! `device_ptr`/`device_ptr_mut`, so cudarc's `SyncOnDrop` guards decide the cross-stream
//! ordering, exactly as in code that calls its own kernels through cudarc.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use cudarc::driver::sys::{CUdeviceptr, CUfunction, CUmodule, CUstream};
use cudarc::driver::{result, CudaContext, DriverError};

/// `spin(cycles)`: one thread waits `cycles` clock ticks, the CUDA analogue of
/// `torch.cuda._sleep`. Enqueued before a producer, it keeps that stream busy long enough that an
/// unordered consumer on another stream runs first, every time.
/// `fill(dst, value, n)`: `dst[i] = value`. `scale(dst, src, factor, n)`: `dst[i] = src[i] * factor`.
const PTX: &CStr = cr#"
.version 7.0
.target sm_80
.address_size 64

.visible .entry spin(.param .u64 cycles)
{
    .reg .pred %p;
    .reg .u64 %start, %now, %limit;
    ld.param.u64 %limit, [cycles];
    mov.u64 %start, %clock64;
SPIN:
    mov.u64 %now, %clock64;
    sub.u64 %now, %now, %start;
    setp.lt.u64 %p, %now, %limit;
    @%p bra SPIN;
    ret;
}

.visible .entry fill(.param .u64 dst, .param .f32 value, .param .u64 n)
{
    .reg .pred %p;
    .reg .u32 %block, %width, %thread;
    .reg .u64 %i, %count, %base, %offset, %t64;
    .reg .f32 %v;
    ld.param.u64 %base, [dst];
    ld.param.f32 %v, [value];
    ld.param.u64 %count, [n];
    mov.u32 %block, %ctaid.x;
    mov.u32 %width, %ntid.x;
    mov.u32 %thread, %tid.x;
    cvt.u64.u32 %t64, %thread;
    mad.wide.u32 %i, %block, %width, %t64;
    setp.ge.u64 %p, %i, %count;
    @%p bra FILL_DONE;
    cvta.to.global.u64 %base, %base;
    shl.b64 %offset, %i, 2;
    add.u64 %base, %base, %offset;
    st.global.f32 [%base], %v;
FILL_DONE:
    ret;
}

.visible .entry scale(.param .u64 dst, .param .u64 src, .param .f32 factor, .param .u64 n)
{
    .reg .pred %p;
    .reg .u32 %block, %width, %thread;
    .reg .u64 %i, %count, %out, %in, %offset, %t64;
    .reg .f32 %k, %x;
    ld.param.u64 %out, [dst];
    ld.param.u64 %in, [src];
    ld.param.f32 %k, [factor];
    ld.param.u64 %count, [n];
    mov.u32 %block, %ctaid.x;
    mov.u32 %width, %ntid.x;
    mov.u32 %thread, %tid.x;
    cvt.u64.u32 %t64, %thread;
    mad.wide.u32 %i, %block, %width, %t64;
    setp.ge.u64 %p, %i, %count;
    @%p bra SCALE_DONE;
    shl.b64 %offset, %i, 2;
    cvta.to.global.u64 %in, %in;
    add.u64 %in, %in, %offset;
    ld.global.f32 %x, [%in];
    mul.f32 %x, %x, %k;
    cvta.to.global.u64 %out, %out;
    add.u64 %out, %out, %offset;
    st.global.f32 [%out], %x;
SCALE_DONE:
    ret;
}
"#;

/// Threads per block of `fill` and `scale`.
const BLOCK: u32 = 256;

/// The loaded kernels. The module stays loaded as long as this value lives.
pub struct Kernels {
    ctx: Arc<CudaContext>,
    module: CUmodule,
    spin: CUfunction,
    fill: CUfunction,
    scale: CUfunction,
}

impl Kernels {
    /// Load the PTX into `ctx` (the driver compiles it for the GPU at hand).
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Kernels, DriverError> {
        ctx.bind_to_thread()?;
        // SAFETY: `PTX` is a NUL-terminated PTX image that lives for the whole program.
        let module = unsafe { result::module::load_data(PTX.as_ptr().cast()) }?;
        let function = |name: &CStr| {
            // SAFETY: `module` was just loaded and is unloaded only when `Kernels` drops.
            unsafe { result::module::get_function(module, name.to_owned()) }
        };
        let loaded = (function(c"spin"), function(c"fill"), function(c"scale"));
        match loaded {
            (Ok(spin), Ok(fill), Ok(scale)) => Ok(Kernels {
                ctx: ctx.clone(),
                module,
                spin,
                fill,
                scale,
            }),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                // SAFETY: no function of the module is handed out.
                let _ = unsafe { result::module::unload(module) };
                Err(e)
            }
        }
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the functions die with `self`; every launch was synchronized by the runner.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}

/// One trial's parameters.
#[derive(Copy, Clone, Debug)]
pub struct Trial {
    /// Elements per buffer.
    pub n: usize,
    /// The value the producer writes; it differs from trial to trial, so memory left over from
    /// an earlier trial never looks right.
    pub value: f32,
    /// Clock ticks the delayed stream spins before its producer runs.
    pub cycles: u64,
}

/// Elements of `values` that are not `expected`.
pub fn wrong(values: &[f32], expected: f32) -> usize {
    values.iter().filter(|v| **v != expected).count()
}

/// Enqueue `spin(cycles)` on `stream`.
///
/// # Safety
/// `stream` must be a live stream of the context the kernels were loaded into.
pub unsafe fn spin(k: &Kernels, cycles: u64, stream: CUstream) -> Result<(), DriverError> {
    let mut cycles = cycles;
    let mut params = [(&mut cycles as *mut u64).cast::<c_void>()];
    result::launch_kernel(k.spin, (1, 1, 1), (1, 1, 1), 0, stream, &mut params)
}

/// Enqueue `dst[i] = value` for `i < n` on `stream`.
///
/// # Safety
/// `dst` must point to at least `n` `f32` of device memory that stays allocated until the
/// kernel has run, and `stream` must be a live stream of the kernels' context.
pub unsafe fn fill(
    k: &Kernels,
    dst: CUdeviceptr,
    value: f32,
    n: usize,
    stream: CUstream,
) -> Result<(), DriverError> {
    let (mut dst, mut value, mut n64) = (dst, value, n as u64);
    let mut params = [
        (&mut dst as *mut CUdeviceptr).cast::<c_void>(),
        (&mut value as *mut f32).cast::<c_void>(),
        (&mut n64 as *mut u64).cast::<c_void>(),
    ];
    result::launch_kernel(k.fill, grid(n), (BLOCK, 1, 1), 0, stream, &mut params)
}

/// Enqueue `dst[i] = src[i] * factor` for `i < n` on `stream`.
///
/// # Safety
/// `dst` and `src` must each point to at least `n` `f32` of device memory that stays allocated
/// until the kernel has run, and `stream` must be a live stream of the kernels' context.
pub unsafe fn scale(
    k: &Kernels,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    factor: f32,
    n: usize,
    stream: CUstream,
) -> Result<(), DriverError> {
    let (mut dst, mut src, mut factor, mut n64) = (dst, src, factor, n as u64);
    let mut params = [
        (&mut dst as *mut CUdeviceptr).cast::<c_void>(),
        (&mut src as *mut CUdeviceptr).cast::<c_void>(),
        (&mut factor as *mut f32).cast::<c_void>(),
        (&mut n64 as *mut u64).cast::<c_void>(),
    ];
    result::launch_kernel(k.scale, grid(n), (BLOCK, 1, 1), 0, stream, &mut params)
}

/// Blocks of `BLOCK` threads that cover `n` elements.
fn grid(n: usize) -> (u32, u32, u32) {
    let blocks = n.div_ceil(BLOCK as usize).max(1);
    (u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_counts_every_element_that_differs() {
        assert_eq!(wrong(&[2.0, 2.0, -2.0, 0.0], 2.0), 2);
        assert_eq!(wrong(&[], 2.0), 0);
    }

    #[test]
    fn the_grid_covers_every_element() {
        assert_eq!(grid(1), (1, 1, 1));
        assert_eq!(grid(256), (1, 1, 1));
        assert_eq!(grid(257), (2, 1, 1));
        assert_eq!(grid(1 << 22), (16384, 1, 1));
        assert_eq!(grid(0), (1, 1, 1));
    }

    /// Every kernel the launchers name is an entry of the PTX text.
    #[test]
    fn the_ptx_defines_the_launched_kernels() {
        let text = PTX.to_str().expect("the PTX text is ASCII");
        for name in ["spin", "fill", "scale"] {
            assert!(
                text.contains(&format!(".visible .entry {name}(")),
                "{name} is missing"
            );
        }
    }
}
