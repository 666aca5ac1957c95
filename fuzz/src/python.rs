//! Python modules built from `arbitrary` data: functions, methods and module code that create
//! streams and events, allocate, copy with and without `non_blocking`, enter stream contexts,
//! wait, record, synchronize and free, nested in every statement form.

use arbitrary::Arbitrary;

use crate::indent;

#[derive(Arbitrary, Debug)]
pub struct Module {
    /// Start with `import torch` (the model knows `torch.cuda` names only once imported).
    imports_torch: bool,
    items: Vec<Item>,
    /// Cut the text here (an editor's text in the middle of an edit).
    cut: Option<u16>,
}

#[derive(Arbitrary, Debug)]
enum Item {
    Function(Function),
    Class {
        name: Name,
        dataset: bool,
        methods: Vec<Function>,
    },
    Statement(Statement),
    Import(Import),
}

#[derive(Arbitrary, Debug)]
enum Import {
    Torch,
    TorchAs(Name),
    FromCuda(Name),
    DeviceModule(Name),
}

#[derive(Arbitrary, Debug)]
struct Function {
    name: Name,
    params: Vec<Name>,
    decorator: Option<Decorator>,
    body: Vec<Statement>,
}

#[derive(Arbitrary, Debug)]
enum Decorator {
    ContextManager,
    StaticMethod,
    NoGrad,
}

#[derive(Arbitrary, Debug)]
enum Statement {
    /// A call of the modelled API on plain names: most of a stream program.
    Call(Api),
    Bind(Name, Api),
    Assign(Name, Expr),
    Unpack(Name, Name, Expr),
    AugAssign(Name, Expr),
    Expr(Expr),
    With(Vec<Expr>, Option<Name>, Vec<Statement>),
    If(Expr, Vec<Statement>, Vec<Statement>),
    For(Name, Expr, Vec<Statement>),
    While(Expr, Vec<Statement>),
    Try(Vec<Statement>, Vec<Statement>, Vec<Statement>),
    Match(Expr, Vec<Vec<Statement>>),
    Return(Option<Expr>),
    Yield(Expr),
    Delete(Name),
    Nonlocal(Name),
    Break,
    Continue,
    Pass,
    Def(Box<Function>),
    Lambda(Name, Expr),
    /// Text the generator does not model (a comment, a suppression, odd tokens).
    Raw(Raw),
}

#[derive(Arbitrary, Debug)]
enum Raw {
    Noqa,
    NoqaCode(u8),
    Comment(String),
    Text(String),
    Continuation,
    Semicolons,
}

#[derive(Arbitrary, Debug)]
enum Expr {
    Name(Name),
    Attribute(Box<Expr>, Name),
    Call(Box<Expr>, Vec<Expr>),
    Api(Box<Api>),
    Int(i8),
    Str(String),
    Bool(bool),
    None,
    Add(Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Subscript(Box<Expr>, Box<Expr>),
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    ListComp(Box<Expr>, Name, Box<Expr>),
    IfElse(Box<Expr>, Box<Expr>, Box<Expr>),
    Await(Box<Expr>),
    FString(Name),
}

/// The calls the model knows, with their arguments.
#[derive(Arbitrary, Debug)]
enum Api {
    NewStream(Option<Name>),
    CurrentStream,
    DefaultStream,
    StreamContext(Name),
    SetStream(Name),
    WaitStream(Name, Name),
    RecordStream(Name, Name),
    NewEvent(bool),
    Record(Name, Option<Name>),
    RecordEvent(Name),
    WaitEvent(Name, Name),
    EventWait(Name, Option<Name>),
    Synchronize(Option<Name>),
    DeviceSynchronize,
    Empty {
        pinned: bool,
        device: Device,
    },
    Like(Name),
    Op(Name, Name),
    ToDevice {
        value: Name,
        device: Device,
        non_blocking: NonBlocking,
    },
    CopyInto {
        dst: Name,
        src: Name,
        non_blocking: NonBlocking,
    },
    PinMemory(Name),
    HostRead(Name, HostRead),
    Free(Name),
    ResizeStorage(Name),
    DataAssign(Name),
    Submit(Name),
    Split(Name),
    DataLoader {
        dataset: Name,
        workers: u8,
    },
}

#[derive(Arbitrary, Debug)]
enum Device {
    Cuda,
    CudaIndex(u8),
    Cpu,
    Named(Name),
}

#[derive(Arbitrary, Debug)]
enum NonBlocking {
    Absent,
    Keyword(bool),
    Positional,
    Named(Name),
}

#[derive(Arbitrary, Debug)]
enum HostRead {
    Item,
    Numpy,
    Tolist,
    Print,
    Index,
}

/// Names from a small vocabulary, so that what one statement makes another uses.
#[derive(Arbitrary, Debug)]
enum Name {
    X,
    Y,
    Buf,
    Out,
    Host,
    Batch,
    Side,
    Stream,
    CopyStream,
    Event,
    Done,
    SelfStream,
    SelfBuf,
    SelfEvent,
    SelfBatch,
    Torch,
    I,
    Other(String),
}

impl Name {
    fn text(&self) -> String {
        let fixed = match self {
            Name::X => "x",
            Name::Y => "y",
            Name::Buf => "buf",
            Name::Out => "out",
            Name::Host => "host_buf",
            Name::Batch => "batch",
            Name::Side => "side",
            Name::Stream => "stream",
            Name::CopyStream => "copy_stream",
            Name::Event => "ev",
            Name::Done => "done",
            Name::SelfStream => "self.stream",
            Name::SelfBuf => "self.buf",
            Name::SelfEvent => "self.done",
            Name::SelfBatch => "self.batch",
            Name::Torch => "torch",
            Name::I => "i",
            Name::Other(s) => return identifier(s),
        };
        fixed.to_string()
    }
}

/// An identifier made of `s`'s letters (any script), or `v` when none is left.
fn identifier(s: &str) -> String {
    let id: String = s
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_')
        .skip_while(|c| c.is_numeric())
        .take(12)
        .collect();
    if id.is_empty() {
        "v".into()
    } else {
        id
    }
}

/// A string literal of `s`, escaped.
fn literal(s: &str) -> String {
    format!("{s:?}")
}

impl Module {
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.imports_torch {
            out.push_str("import torch\n");
        }
        for item in &self.items {
            item.render(&mut out);
        }
        crate::truncated(out, self.cut)
    }
}

impl Item {
    fn render(&self, out: &mut String) {
        match self {
            Item::Function(f) => f.render(out, 0),
            Item::Class {
                name,
                dataset,
                methods,
            } => {
                let base = if *dataset {
                    "(torch.utils.data.Dataset)"
                } else {
                    ""
                };
                out.push_str(&format!("class {}{base}:\n", identifier(&name.text())));
                if methods.is_empty() {
                    out.push_str("    pass\n");
                }
                for m in methods {
                    m.render_method(out);
                }
            }
            Item::Statement(s) => s.render(out, 0),
            Item::Import(i) => out.push_str(&match i {
                Import::Torch => "import torch\n".to_string(),
                Import::TorchAs(n) => format!("import torch as {}\n", identifier(&n.text())),
                Import::FromCuda(n) => {
                    format!("from torch.cuda import {}\n", identifier(&n.text()))
                }
                Import::DeviceModule(n) => {
                    format!("{} = torch.get_device_module()\n", identifier(&n.text()))
                }
            }),
        }
    }
}

impl Function {
    fn render(&self, out: &mut String, depth: usize) {
        self.render_with(out, depth, false);
    }

    fn render_method(&self, out: &mut String) {
        self.render_with(out, 1, true);
    }

    fn render_with(&self, out: &mut String, depth: usize, method: bool) {
        if let Some(d) = &self.decorator {
            indent(out, depth);
            out.push_str(match d {
                Decorator::ContextManager => "@contextlib.contextmanager\n",
                Decorator::StaticMethod => "@staticmethod\n",
                Decorator::NoGrad => "@torch.no_grad()\n",
            });
        }
        let mut params: Vec<String> = self.params.iter().map(|p| identifier(&p.text())).collect();
        if method {
            params.insert(0, "self".into());
        }
        params.dedup();
        indent(out, depth);
        let name = match (&self.name, method) {
            (Name::X, true) => "__init__".to_string(),
            (Name::Y, true) => "__getitem__".to_string(),
            (Name::Batch, true) => "next".to_string(),
            (n, _) => identifier(&n.text()),
        };
        out.push_str(&format!("def {name}({}):\n", params.join(", ")));
        block(out, &self.body, depth + 1);
    }
}

fn block(out: &mut String, body: &[Statement], depth: usize) {
    if body.is_empty() {
        indent(out, depth);
        out.push_str("pass\n");
    }
    for s in body {
        s.render(out, depth);
    }
}

impl Statement {
    fn render(&self, out: &mut String, depth: usize) {
        let line = |out: &mut String, text: String| {
            indent(out, depth);
            out.push_str(&text);
            out.push('\n');
        };
        match self {
            Statement::Call(api) => line(out, api.render()),
            Statement::Bind(n, api) => line(out, format!("{} = {}", n.text(), api.render())),
            Statement::Assign(n, e) => line(out, format!("{} = {}", n.text(), e.render())),
            Statement::Unpack(a, b, e) => {
                line(out, format!("{}, {} = {}", a.text(), b.text(), e.render()))
            }
            Statement::AugAssign(n, e) => line(out, format!("{} += {}", n.text(), e.render())),
            Statement::Expr(e) => line(out, e.render()),
            Statement::With(items, target, body) => {
                let mut items: Vec<String> = items.iter().map(Expr::render).collect();
                if items.is_empty() {
                    items.push("torch.cuda.stream(side)".into());
                }
                let target = target
                    .as_ref()
                    .map(|t| format!(" as {}", identifier(&t.text())))
                    .unwrap_or_default();
                line(out, format!("with {}{target}:", items.join(", ")));
                block(out, body, depth + 1);
            }
            Statement::If(c, body, orelse) => {
                line(out, format!("if {}:", c.render()));
                block(out, body, depth + 1);
                if !orelse.is_empty() {
                    line(out, "else:".into());
                    block(out, orelse, depth + 1);
                }
            }
            Statement::For(n, e, body) => {
                line(
                    out,
                    format!("for {} in {}:", identifier(&n.text()), e.render()),
                );
                block(out, body, depth + 1);
            }
            Statement::While(c, body) => {
                line(out, format!("while {}:", c.render()));
                block(out, body, depth + 1);
            }
            Statement::Try(body, handler, finally) => {
                line(out, "try:".into());
                block(out, body, depth + 1);
                if !handler.is_empty() || finally.is_empty() {
                    line(out, "except Exception:".into());
                    block(out, handler, depth + 1);
                }
                if !finally.is_empty() {
                    line(out, "finally:".into());
                    block(out, finally, depth + 1);
                }
            }
            Statement::Match(e, cases) => {
                line(out, format!("match {}:", e.render()));
                for (i, case) in cases.iter().enumerate() {
                    indent(out, depth + 1);
                    if i + 1 == cases.len() {
                        out.push_str("case _:\n");
                    } else {
                        out.push_str(&format!("case {i}:\n"));
                    }
                    block(out, case, depth + 2);
                }
                if cases.is_empty() {
                    indent(out, depth + 1);
                    out.push_str("case _:\n");
                    block(out, &[], depth + 2);
                }
            }
            Statement::Return(e) => line(
                out,
                e.as_ref()
                    .map(|e| format!("return {}", e.render()))
                    .unwrap_or_else(|| "return".into()),
            ),
            Statement::Yield(e) => line(out, format!("yield {}", e.render())),
            Statement::Delete(n) => line(out, format!("del {}", n.text())),
            Statement::Nonlocal(n) => line(out, format!("global {}", identifier(&n.text()))),
            Statement::Break => line(out, "break".into()),
            Statement::Continue => line(out, "continue".into()),
            Statement::Pass => line(out, "pass".into()),
            Statement::Def(f) => f.render(out, depth),
            Statement::Lambda(n, e) => line(
                out,
                format!("{} = lambda: {}", identifier(&n.text()), e.render()),
            ),
            Statement::Raw(r) => match r {
                Raw::Noqa => line(out, "x.record_stream(side)  # noqa".into()),
                Raw::NoqaCode(c) => line(out, format!("y = x * 2  # noqa: SL{:03}", c % 12)),
                Raw::Comment(c) => line(out, format!("# {}", c.replace(['\n', '\r'], " "))),
                Raw::Text(t) => line(out, t.clone()),
                Raw::Continuation => line(out, "y = (x +\n    1) \\\n    * 2".into()),
                Raw::Semicolons => line(out, "a = x; b = a * 2; del a".into()),
            },
        }
    }
}

impl Expr {
    fn render(&self) -> String {
        match self {
            Expr::Name(n) => n.text(),
            Expr::Attribute(e, n) => format!("{}.{}", e.render(), identifier(&n.text())),
            Expr::Call(f, args) => format!("{}({})", f.render(), list(args)),
            Expr::Api(api) => api.render(),
            Expr::Int(i) => i.to_string(),
            Expr::Str(s) => literal(s),
            Expr::Bool(b) => if *b { "True" } else { "False" }.into(),
            Expr::None => "None".into(),
            Expr::Add(a, b) => format!("({} + {})", a.render(), b.render()),
            Expr::Compare(a, b) => format!("({} == {})", a.render(), b.render()),
            Expr::Not(e) => format!("(not {})", e.render()),
            Expr::Subscript(a, b) => format!("{}[{}]", a.render(), b.render()),
            Expr::Tuple(items) => format!("({},)", list(items)),
            Expr::List(items) => format!("[{}]", list(items)),
            Expr::ListComp(e, n, it) => format!(
                "[{} for {} in {}]",
                e.render(),
                identifier(&n.text()),
                it.render()
            ),
            Expr::IfElse(a, c, b) => {
                format!("({} if {} else {})", a.render(), c.render(), b.render())
            }
            Expr::Await(e) => format!("(await {})", e.render()),
            Expr::FString(n) => format!("f\"{{{}!r}} done\"", n.text()),
        }
    }
}

fn list(items: &[Expr]) -> String {
    items
        .iter()
        .map(Expr::render)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Device {
    fn render(&self) -> String {
        match self {
            Device::Cuda => "\"cuda\"".into(),
            Device::CudaIndex(i) => format!("\"cuda:{}\"", i % 8),
            Device::Cpu => "\"cpu\"".into(),
            Device::Named(n) => n.text(),
        }
    }
}

impl NonBlocking {
    fn keyword(&self) -> String {
        match self {
            NonBlocking::Absent => String::new(),
            NonBlocking::Keyword(b) => {
                format!(", non_blocking={}", if *b { "True" } else { "False" })
            }
            NonBlocking::Positional => ", True".into(),
            NonBlocking::Named(n) => format!(", non_blocking={}", n.text()),
        }
    }
}

impl Api {
    fn render(&self) -> String {
        match self {
            Api::NewStream(device) => format!(
                "torch.cuda.Stream({})",
                device.as_ref().map(Name::text).unwrap_or_default()
            ),
            Api::CurrentStream => "torch.cuda.current_stream()".into(),
            Api::DefaultStream => "torch.cuda.default_stream()".into(),
            Api::StreamContext(s) => format!("torch.cuda.stream({})", s.text()),
            Api::SetStream(s) => format!("torch.cuda.set_stream({})", s.text()),
            Api::WaitStream(a, b) => format!("{}.wait_stream({})", a.text(), b.text()),
            Api::RecordStream(t, s) => format!("{}.record_stream({})", t.text(), s.text()),
            Api::NewEvent(timing) => format!(
                "torch.cuda.Event(enable_timing={})",
                if *timing { "True" } else { "False" }
            ),
            Api::Record(e, s) => format!(
                "{}.record({})",
                e.text(),
                s.as_ref().map(Name::text).unwrap_or_default()
            ),
            Api::RecordEvent(s) => format!("{}.record_event()", s.text()),
            Api::WaitEvent(s, e) => format!("{}.wait_event({})", s.text(), e.text()),
            Api::EventWait(e, s) => format!(
                "{}.wait({})",
                e.text(),
                s.as_ref().map(Name::text).unwrap_or_default()
            ),
            Api::Synchronize(x) => match x {
                Some(x) => format!("{}.synchronize()", x.text()),
                None => "torch.cuda.synchronize()".into(),
            },
            Api::DeviceSynchronize => "torch.cuda.current_stream().synchronize()".into(),
            Api::Empty { pinned, device } => format!(
                "torch.empty(1024, device={}, pin_memory={})",
                device.render(),
                if *pinned { "True" } else { "False" }
            ),
            Api::Like(x) => format!("torch.empty_like({})", x.text()),
            Api::Op(a, b) => format!("torch.matmul({}, {})", a.text(), b.text()),
            Api::ToDevice {
                value,
                device,
                non_blocking,
            } => format!(
                "{}.to({}{})",
                value.text(),
                device.render(),
                non_blocking.keyword()
            ),
            Api::CopyInto {
                dst,
                src,
                non_blocking,
            } => format!(
                "{}.copy_({}{})",
                dst.text(),
                src.text(),
                non_blocking.keyword()
            ),
            Api::PinMemory(x) => format!("{}.pin_memory()", x.text()),
            Api::HostRead(x, how) => match how {
                HostRead::Item => format!("{}.item()", x.text()),
                HostRead::Numpy => format!("{}.numpy()", x.text()),
                HostRead::Tolist => format!("{}.tolist()", x.text()),
                HostRead::Print => format!("print({})", x.text()),
                HostRead::Index => format!("float({}[0])", x.text()),
            },
            Api::Free(x) => format!("{}.untyped_storage().resize_(0)", x.text()),
            Api::ResizeStorage(x) => format!("{}.untyped_storage().resize_(4096)", x.text()),
            Api::DataAssign(x) => format!("setattr({}, \"data\", torch.empty(0))", x.text()),
            Api::Submit(x) => format!("pool.submit(work, {})", x.text()),
            Api::Split(x) => format!("torch.split({}, 2)", x.text()),
            Api::DataLoader { dataset, workers } => format!(
                "torch.utils.data.DataLoader({}, num_workers={})",
                dataset.text(),
                workers % 4
            ),
        }
    }
}
