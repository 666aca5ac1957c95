//! Rust functions built from `arbitrary` data: cudarc code (owned and borrowed streams, tracked
//! and untracked slices, pointer guards, raw launches, events, joins) and cust code (streams,
//! device buffers, async copies and frees, `launch!`), nested in blocks, branches, loops,
//! closures and `match`.

use arbitrary::Arbitrary;

use crate::indent;

#[derive(Arbitrary, Debug)]
pub struct File {
    cust: bool,
    functions: Vec<Function>,
    cut: Option<u16>,
}

#[derive(Arbitrary, Debug)]
struct Function {
    name: u8,
    params: Vec<Param>,
    body: Vec<Statement>,
}

#[derive(Arbitrary, Debug)]
enum Param {
    Context,
    Stream(Var),
    Slice(Var),
    SliceMut(Var),
    Host(Var),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Var {
    A,
    B,
    Out,
    Main,
    Copy,
    Side,
    Ev,
    Guard,
    Ptr,
    Host,
}

impl Var {
    fn name(self) -> &'static str {
        match self {
            Var::A => "a",
            Var::B => "b",
            Var::Out => "out",
            Var::Main => "main",
            Var::Copy => "copy",
            Var::Side => "side",
            Var::Ev => "ev",
            Var::Guard => "guard",
            Var::Ptr => "ptr",
            Var::Host => "host",
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Statement {
    Call(Call),
    Let(Var, Call),
    Block(Vec<Statement>),
    Unsafe(Vec<Statement>),
    If(Var, Vec<Statement>, Vec<Statement>),
    For(Vec<Statement>),
    Loop(Vec<Statement>),
    While(Vec<Statement>),
    Match(Var, Vec<Vec<Statement>>),
    Closure(Var, Vec<Statement>),
    Drop(Var),
    Return(Var),
    Break,
    Raw(String),
}

/// The calls the model knows.
#[derive(Arbitrary, Debug)]
enum Call {
    NewStream,
    DefaultStream,
    PerThreadStream,
    Fork(Var),
    Join(Var, Var),
    AllocZeros(Var),
    CloneHtod(Var, Var),
    CloneDtoh(Var, Var),
    MemcpyHtod(Var, Var, Var),
    MemcpyDtoh(Var, Var, Var),
    MemcpyDtod(Var, Var, Var),
    DevicePtr(Var, Var),
    DevicePtrMut(Var, Var),
    DevicePtrDiscarded(Var, Var),
    RawLaunch(Var, Var),
    LaunchBuilder(Var, Vec<Var>),
    DisableTracking,
    NewEvent(Var),
    RecordEvent(Var),
    Record(Var, Var),
    Wait(Var, Var),
    Synchronize(Var),
    SliceOf(Var),
    SplitAtMut(Var),
    CustStream,
    CustBuffer(Var),
    CustAsyncCopy(Var, Var, Var),
    CustDropAsync(Var, Var),
    CustLaunch(Var, Var),
    CustEvent,
    CustWaitEvent(Var, Var),
    Ffi(Var, Var),
}

impl File {
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.cust {
            out.push_str("use cust::prelude::*;\nuse cust::event::{Event, EventFlags};\n");
        } else {
            out.push_str(
                "use std::sync::Arc;\nuse cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError, LaunchConfig, PushKernelArg};\n",
            );
        }
        for f in &self.functions {
            f.render(&mut out);
        }
        crate::truncated(out, self.cut)
    }
}

impl Function {
    fn render(&self, out: &mut String) {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| match p {
                Param::Context => "ctx: &Arc<CudaContext>".to_string(),
                Param::Stream(v) => format!("{}: &Arc<CudaStream>", v.name()),
                Param::Slice(v) => format!("{}: &CudaSlice<f32>", v.name()),
                Param::SliceMut(v) => format!("{}: &mut CudaSlice<f32>", v.name()),
                Param::Host(v) => format!("{}: &mut [f32]", v.name()),
            })
            .collect();
        out.push_str(&format!(
            "\npub fn step_{}({}) -> Result<(), DriverError> {{\n",
            self.name,
            params.join(", ")
        ));
        block(out, &self.body, 1);
        out.push_str("    Ok(())\n}\n");
    }
}

fn block(out: &mut String, body: &[Statement], depth: usize) {
    for s in body {
        s.render(out, depth);
    }
}

fn braced(out: &mut String, head: &str, body: &[Statement], depth: usize) {
    indent(out, depth);
    out.push_str(head);
    out.push_str("{\n");
    block(out, body, depth + 1);
    indent(out, depth);
    out.push_str("}\n");
}

impl Statement {
    fn render(&self, out: &mut String, depth: usize) {
        let line = |out: &mut String, text: String| {
            indent(out, depth);
            out.push_str(&text);
            out.push('\n');
        };
        match self {
            Statement::Call(c) => line(out, format!("{};", c.render())),
            Statement::Let(v, c) => line(out, format!("let {} = {};", v.name(), c.render())),
            Statement::Block(b) => braced(out, "", b, depth),
            Statement::Unsafe(b) => braced(out, "unsafe ", b, depth),
            Statement::If(v, a, b) => {
                braced(out, &format!("if {}.len() > 1 ", v.name()), a, depth);
                if !b.is_empty() {
                    braced(out, "else ", b, depth);
                }
            }
            Statement::For(b) => braced(out, "for _ in 0..4 ", b, depth),
            Statement::Loop(b) => braced(out, "loop ", b, depth),
            Statement::While(b) => braced(out, "while ready() ", b, depth),
            Statement::Match(v, arms) => {
                line(out, format!("match {}.len() {{", v.name()));
                for (i, arm) in arms.iter().enumerate() {
                    braced(out, &format!("{i} => "), arm, depth + 1);
                }
                line(out, "    _ => {}".into());
                line(out, "}".into());
            }
            Statement::Closure(v, b) => {
                braced(out, &format!("let {} = || ", v.name()), b, depth);
                line(out, format!("{}();", v.name()));
            }
            Statement::Drop(v) => line(out, format!("drop({});", v.name())),
            Statement::Return(v) => line(out, format!("return Ok({});", v.name())),
            Statement::Break => line(out, "break;".into()),
            Statement::Raw(text) => line(out, text.clone()),
        }
    }
}

impl Call {
    fn render(&self) -> String {
        match self {
            Call::NewStream => "ctx.new_stream()?".into(),
            Call::DefaultStream => "ctx.default_stream()".into(),
            Call::PerThreadStream => "ctx.per_thread_stream()".into(),
            Call::Fork(s) => format!("{}.fork()?", s.name()),
            Call::Join(a, b) => format!("{}.join(&{})?", a.name(), b.name()),
            Call::AllocZeros(s) => format!("{}.alloc_zeros::<f32>(1024)?", s.name()),
            Call::CloneHtod(s, h) => format!("{}.clone_htod(&{})?", s.name(), h.name()),
            Call::CloneDtoh(s, d) => format!("{}.clone_dtoh(&{})?", s.name(), d.name()),
            Call::MemcpyHtod(s, h, d) => {
                format!(
                    "{}.memcpy_htod(&{}, &mut {})?",
                    s.name(),
                    h.name(),
                    d.name()
                )
            }
            Call::MemcpyDtoh(s, d, h) => {
                format!(
                    "{}.memcpy_dtoh(&{}, &mut {})?",
                    s.name(),
                    d.name(),
                    h.name()
                )
            }
            Call::MemcpyDtod(s, a, b) => {
                format!(
                    "{}.memcpy_dtod(&{}, &mut {})?",
                    s.name(),
                    a.name(),
                    b.name()
                )
            }
            Call::DevicePtr(d, s) => format!("{}.device_ptr(&{})", d.name(), s.name()),
            Call::DevicePtrMut(d, s) => format!("{}.device_ptr_mut(&{})", d.name(), s.name()),
            Call::DevicePtrDiscarded(d, s) => {
                format!("{}.device_ptr(&{}).0", d.name(), s.name())
            }
            Call::RawLaunch(p, s) => format!(
                "unsafe {{ kernel({} as *mut f32, {}.cu_stream()) }}",
                p.name(),
                s.name()
            ),
            Call::LaunchBuilder(s, args) => {
                let mut text = format!("{{ let mut l = {}.launch_builder(&f);", s.name());
                for a in args {
                    text.push_str(&format!(" l.arg(&{});", a.name()));
                }
                text.push_str(" unsafe { l.launch(LaunchConfig::for_num_elems(1024)) }? }");
                text
            }
            Call::DisableTracking => "unsafe { ctx.disable_event_tracking() }".into(),
            Call::NewEvent(s) => format!("{}.context().new_event(None)?", s.name()),
            Call::RecordEvent(s) => format!("{}.record_event(None)?", s.name()),
            Call::Record(e, s) => format!("{}.record(&{})?", e.name(), s.name()),
            Call::Wait(s, e) => format!("{}.wait(&{})?", s.name(), e.name()),
            Call::Synchronize(s) => format!("{}.synchronize()?", s.name()),
            Call::SliceOf(d) => format!("{}.slice(0..512)", d.name()),
            Call::SplitAtMut(d) => format!("{}.split_at_mut(512)", d.name()),
            Call::CustStream => "Stream::new(StreamFlags::NON_BLOCKING, None)?".into(),
            Call::CustBuffer(s) => format!(
                "unsafe {{ DeviceBuffer::<f32>::uninitialized_async(1024, &{})? }}",
                s.name()
            ),
            Call::CustAsyncCopy(d, h, s) => format!(
                "unsafe {{ {}.async_copy_from(&{}, &{})? }}",
                d.name(),
                h.name(),
                s.name()
            ),
            Call::CustDropAsync(d, s) => format!("{}.drop_async(&{})?", d.name(), s.name()),
            Call::CustLaunch(s, d) => format!(
                "unsafe {{ launch!(module.k<<<1, 128, 0, {}>>>({}.as_device_ptr(), 1024))? }}",
                s.name(),
                d.name()
            ),
            Call::CustEvent => "Event::new(EventFlags::DISABLE_TIMING)?".into(),
            Call::CustWaitEvent(s, e) => format!(
                "{}.wait_event(&{}, StreamWaitEventFlags::DEFAULT)?",
                s.name(),
                e.name()
            ),
            Call::Ffi(p, s) => format!(
                "unsafe {{ ffi_kernel({} as *const c_void, {}.cu_stream() as _) }}",
                p.name(),
                s.name()
            ),
        }
    }
}
