//! The PyTorch API model: which qualified names create, enter, wait on or synchronize streams and
//! events, which calls make tensors, and which tensor methods are views, in-place writes or host
//! reads. Names are matched after import resolution (`import torch as th` makes `th.cuda.Stream`
//! read as `torch.cuda.Stream`). Projects extend the model with their own names.

use rustc_hash::FxHashSet;

use crate::names::Imports;
use crate::syntax::{Expr, Keyword, Operator};

/// What a call of a known free function does.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ApiCall {
    StreamFactory,
    /// `torch.cuda.stream(s)`: a context manager that makes `s` current.
    StreamContext,
    CurrentStream,
    DefaultStream,
    SetStream,
    EventFactory,
    DeviceSynchronize,
    /// A factory that makes a tensor (`torch.empty`, `torch.zeros_like`, ...).
    TensorFactory,
    /// `torch.tensor`/`torch.as_tensor`: copies host data, onto the device when asked.
    TensorFromData,
    /// Any other `torch.*` function: reads tensor arguments, makes a tensor.
    TensorOp,
    /// A collective: reads and writes its tensor arguments on the current stream.
    Collective,
    /// `record_stream(tensor, stream)` written as a free function.
    RecordStreamWrapper,
    /// `wait_stream(waiter, waitee)` written as a free function.
    WaitStreamWrapper,
    /// A project function that synchronizes the device.
    SynchronizeWrapper,
    /// A data-parallel wrapper of a module (`DistributedDataParallel`, FSDP, `fully_shard`):
    /// its constructor works on the module's tensors on the current stream.
    DataParallelWrap,
    /// A comparison that answers on the host (`torch.equal`, `torch.allclose`,
    /// `torch.testing.assert_close`): it reads its tensors on the current stream and waits for
    /// that stream, as `.item()` does.
    HostComparison,
    /// `torch.cuda.graph(g)`: a context manager whose block is captured into the CUDA graph `g`.
    GraphCapture,
    /// `replay_graph(g)` of an accelerator: `g.replay()`.
    GraphReplay,
    /// `torch.cuda.make_graphed_callables(module, sample_args)`: synchronizes the device before
    /// its warm-up and again before it captures, and keeps the sample tensors as the graphs'
    /// static inputs; the callables it returns replay on the stream current at each call.
    GraphedCallables,
}

/// Functions that compare tensors and give the answer to the host (see
/// [`ApiCall::HostComparison`]).
const HOST_COMPARISONS: &[&str] = &[
    "torch.equal",
    "torch.allclose",
    "torch.is_nonzero",
    "torch.testing.assert_close",
    "torch.testing.assert_allclose",
];

/// Tensor functions and methods whose result's size depends on the data: the host waits for
/// the current stream to learn it (`nonzero`, `masked_select`, `unique`).
pub const DATA_DEPENDENT_SHAPES: &[&str] = &[
    "nonzero",
    "argwhere",
    "masked_select",
    "unique",
    "unique_consecutive",
];

/// Helpers that apply a function to every tensor of a nested structure (dicts, lists, tuples,
/// dataclasses) and return the structure of the results: for each, where the function and the
/// structure are passed (positions, and the keyword of the function).
const MAPPING_HELPERS: &[(&str, usize, usize, &str)] = &[
    ("torch.utils._pytree.tree_map", 0, 1, "func"),
    ("torch.utils._pytree.tree_map_only", 1, 2, "func"),
    ("optree.tree_map", 0, 1, "func"),
    (
        "lightning.fabric.utilities.apply_func.apply_to_collection",
        2,
        0,
        "function",
    ),
    (
        "lightning.pytorch.utilities.apply_func.apply_to_collection",
        2,
        0,
        "function",
    ),
    (
        "lightning_utilities.core.apply_func.apply_to_collection",
        2,
        0,
        "function",
    ),
    (
        "pytorch_lightning.utilities.apply_func.apply_to_collection",
        2,
        0,
        "function",
    ),
];

/// A host/device buffer pair (vLLM's `CpuGpuBuffer`, which a model runner's `_make_buffer(..)`
/// builds): a pinned host tensor `.cpu`, with a NumPy view `.np`, a device tensor `.gpu`, and
/// `copy_to_gpu()`, a non-blocking copy from the first to the second. Writing `.np` or `.cpu`
/// while the last copy may still read them hands the device the new values.
pub fn makes_host_device_pair(call: &Expr) -> bool {
    let Expr::Call { func, .. } = call else {
        return false;
    };
    func.dotted().is_some_and(|d| {
        d == "self._make_buffer" || d == "CpuGpuBuffer" || d.ends_with(".CpuGpuBuffer")
    })
}

/// The views of a host/device buffer pair that are its host memory.
pub const PAIR_HOST_VIEWS: &[&str] = &["np", "cpu"];

/// Is `name` the last name of one of `MAPPING_HELPERS` (a test that needs no lookup)?
fn is_mapping_helper_name(name: &str) -> bool {
    matches!(name, "tree_map" | "tree_map_only" | "apply_to_collection")
}

/// What a mapping helper applies to every tensor of a structure.
pub enum MappedFunction<'e> {
    /// `tree_map(lambda t: t.cuda(), batch)`: its parameters and body.
    Lambda {
        params: &'e [String],
        body: &'e Expr,
        span: streamlint_graph::Span,
    },
    /// `tree_map(to_device, batch)`: a function named by the expression.
    Named(&'e Expr),
}

/// A mapping helper's call: the function and the structure it is mapped over.
pub struct MappedCall<'e> {
    pub function: MappedFunction<'e>,
    pub structure: &'e Expr,
}

/// The function a mapping helper applies, if the call is one. Asked of every call, so a call
/// whose callee is not named like a helper costs no name lookup.
pub fn mapped_call<'e>(
    func: &Expr,
    args: &'e [Expr],
    keywords: &'e [Keyword],
    imports: &Imports,
) -> Option<MappedCall<'e>> {
    let last = match func {
        Expr::Name { id, .. } => id.as_str(),
        Expr::Attribute { attr, .. } => attr.as_str(),
        _ => return None,
    };
    if !is_mapping_helper_name(last) {
        return None;
    }
    let qualified = imports.qualify(func)?;
    let &(_, at, structure, keyword) = MAPPING_HELPERS
        .iter()
        .find(|(name, ..)| *name == qualified)?;
    let function = match args.get(at).or_else(|| Expr::keyword(keywords, keyword))? {
        Expr::Lambda { params, body, span } => MappedFunction::Lambda {
            params,
            body,
            span: *span,
        },
        named @ (Expr::Name { .. } | Expr::Attribute { .. }) => MappedFunction::Named(named),
        _ => return None,
    };
    Some(MappedCall {
        function,
        structure: args.get(structure)?,
    })
}

/// Does the function list the tensors of a nested structure (`tree_leaves(batch)`)? A loop over
/// its result is a loop over those tensors.
pub fn is_leaves_helper(qualified: &str) -> bool {
    matches!(
        qualified,
        "torch.utils._pytree.tree_leaves" | "optree.tree_leaves"
    )
}

/// How many leading positional arguments of a `torch.distributed` collective are tensors
/// (0 for the rest of the module: process groups, ranks, lists of tensors).
pub fn collective_tensor_args(qualified: &str) -> usize {
    let name = qualified.rsplit('.').next().unwrap_or(qualified);
    match name {
        "all_gather_into_tensor"
        | "reduce_scatter_tensor"
        | "all_to_all_single"
        | "_all_gather_base"
        | "_reduce_scatter_base" => 2,
        "all_reduce" | "reduce" | "broadcast" | "send" | "recv" | "isend" | "irecv" => 1,
        _ => 0,
    }
}

/// The names the frontend recognizes.
#[derive(Clone, Debug)]
pub struct ApiModel {
    /// Prefixes that denote a device module (`torch.cuda`, `get_accelerator()`, ...).
    pub device_modules: FxHashSet<String>,
    pub stream_factories: FxHashSet<String>,
    pub stream_contexts: FxHashSet<String>,
    pub current_stream: FxHashSet<String>,
    pub record_stream_wrappers: FxHashSet<String>,
    pub wait_stream_wrappers: FxHashSet<String>,
    pub synchronize_functions: FxHashSet<String>,
}

fn set(items: &[&str]) -> FxHashSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl Default for ApiModel {
    fn default() -> Self {
        ApiModel {
            device_modules: set(&[
                "torch.cuda",
                "torch.xpu",
                "torch.npu",
                "torch.mtia",
                "torch.accelerator",
                "torch.get_device_module()",
                "get_accelerator()",
                "deepspeed.accelerator.get_accelerator()",
            ]),
            stream_factories: set(&["torch.Stream"]),
            stream_contexts: set(&[]),
            current_stream: set(&[]),
            record_stream_wrappers: set(&["_no_dispatch_record_stream", "record_stream"]),
            wait_stream_wrappers: set(&["wait_stream"]),
            synchronize_functions: set(&[]),
        }
    }
}

const TENSOR_FACTORIES: &[&str] = &[
    "empty",
    "zeros",
    "ones",
    "full",
    "rand",
    "randn",
    "randint",
    "arange",
    "linspace",
    "eye",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "rand_like",
    "randn_like",
    "empty_strided",
];

/// `torch` functions that make no tensor (devices, dtypes, modes, seeds, serialization).
const NON_TENSOR_FUNCTIONS: &[&str] = &[
    "device",
    "dtype",
    "finfo",
    "iinfo",
    "is_tensor",
    "is_floating_point",
    "is_complex",
    "no_grad",
    "enable_grad",
    "inference_mode",
    "set_grad_enabled",
    "is_grad_enabled",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_default_dtype",
    "set_default_dtype",
    "set_default_device",
    "compile",
    "save",
    "numel",
    "get_rng_state",
    "set_rng_state",
    "use_deterministic_algorithms",
    "set_printoptions",
    "typename",
    "set_num_threads",
    "get_num_threads",
    "set_float32_matmul_precision",
    "autocast",
    "is_autocast_enabled",
    "get_device_module",
];

/// `torch` submodules whose functions make no tensor of ours.
const NON_TENSOR_MODULES: &[&str] = &[
    "cuda.",
    "utils.",
    "autograd.",
    "jit.",
    "fx.",
    "_dynamo.",
    "backends.",
    "profiler.",
    "hub.",
    "onnx.",
    "testing.",
    "library.",
    "overrides.",
    "multiprocessing.",
    "amp.",
    "_C.",
    "compiler.",
    "export.",
    "accelerator.",
    "xpu.",
    "npu.",
    "mps.",
    "optim.",
];

/// Methods that hand a value to code on another thread: a queue's `put`, a future's
/// `set_result`. The consumer uses it on its current stream.
pub const THREAD_QUEUE_PUTS: &[&str] = &["put", "put_nowait", "set_result"];

/// Methods, called with no positional argument, that take a value another thread handed over:
/// a queue's `get`, a future's `result`.
pub const THREAD_QUEUE_GETS: &[&str] = &["get", "get_nowait", "result"];

/// Methods that hand a function and its arguments to another thread or process (executors,
/// pools, event loops): the arguments leave this function's stream order.
pub const THREAD_HAND_OFFS: &[&str] =
    &["submit", "apply_async", "starmap_async", "run_in_executor"];

/// Tensor methods that return a view or the tensor itself: no kernel, same storage.
pub const VIEW_METHODS: &[&str] = &[
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "transpose",
    "t",
    "permute",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "split",
    "chunk",
    "unbind",
    "detach",
    "as_strided",
    "contiguous",
    "flatten",
    "unflatten",
    "movedim",
    "swapaxes",
    "requires_grad_",
    "type_as",
    "untyped_storage",
];

/// Attributes of a tensor that are not tensors: read on an argument, they say nothing of
/// whether it holds tensors.
pub const TENSOR_PROPERTIES: &[&str] = &[
    "shape",
    "dtype",
    "device",
    "is_cuda",
    "is_cpu",
    "is_meta",
    "ndim",
    "requires_grad",
    "grad_fn",
    "is_leaf",
    "layout",
    "names",
    "itemsize",
    "nbytes",
    "is_sparse",
    "is_quantized",
];

/// Methods that only read metadata: no device access.
pub const METADATA_METHODS: &[&str] = &[
    "size",
    "dim",
    "numel",
    "nelement",
    "element_size",
    "stride",
    "data_ptr",
    "is_contiguous",
    "storage_offset",
    "get_device",
    "is_pinned",
    "is_floating_point",
    "is_complex",
    "nbytes",
    "itemsize",
    "__len__",
    "register_hook",
];

/// Methods that read a tensor's values on the host (and so wait for the current stream).
pub const HOST_READ_METHODS: &[&str] = &[
    "item",
    "tolist",
    "numpy",
    "__bool__",
    "__int__",
    "__float__",
];

/// Builtins that read a tensor's values on the host.
pub const HOST_READ_BUILTINS: &[&str] = &["print", "float", "int", "bool", "str", "repr", "format"];

/// Builtins that neither read device data nor keep references.
pub const NEUTRAL_BUILTINS: &[&str] = &[
    "len",
    "isinstance",
    "issubclass",
    "hasattr",
    "getattr",
    "setattr",
    "id",
    "type",
    "range",
    "super",
    "callable",
    "enumerate",
    "zip",
    "iter",
    "next",
    "list",
    "tuple",
    "dict",
    "set",
    "sorted",
    "reversed",
    "min",
    "max",
    "sum",
    "any",
    "all",
    "map",
    "filter",
    "round",
    "abs",
    "divmod",
    "hash",
    "vars",
    "dir",
    "open",
];

/// Well-known tensor methods: evidence that an untyped value is a tensor.
pub const TENSOR_METHODS: &[&str] = &[
    "sum",
    "mean",
    "max",
    "min",
    "abs",
    "clone",
    "float",
    "half",
    "bfloat16",
    "double",
    "int",
    "long",
    "bool",
    "add",
    "sub",
    "mul",
    "div",
    "matmul",
    "mm",
    "bmm",
    "norm",
    "exp",
    "log",
    "sqrt",
    "pow",
    "softmax",
    "argmax",
    "argmin",
    "masked_fill",
    "index_select",
    "gather",
    "scatter",
    "where",
    "sigmoid",
    "tanh",
    "relu",
    "cumsum",
    "prod",
    "std",
    "var",
    "all",
    "any",
    "eq",
    "ne",
    "lt",
    "gt",
    "le",
    "ge",
    "neg",
    "round",
    "clamp",
    "to",
    "cuda",
    "cpu",
    "pin_memory",
    "record_stream",
    "backward",
    "copy_",
    "zero_",
    "fill_",
    "add_",
    "mul_",
    "div_",
    "sub_",
    "uniform_",
    "normal_",
    "bernoulli_",
    "index_add_",
    "scatter_",
    "masked_fill_",
    "clamp_",
    "item",
    "tolist",
    "numpy",
    "data",
    "grad",
    "flip",
    "roll",
    "repeat",
    "tile",
    "new_empty",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_tensor",
    "sort",
    "topk",
    "nonzero",
    "split",
    "chunk",
];

/// Predicates of device-agnostic layers whose value is fixed on CUDA devices.
const FALSE_ON_CUDA: &[&str] = &[
    "is_synchronized_device",
    "resolves_data_dependency",
    "handles_memory_backpressure",
];

impl ApiModel {
    /// The last part of every name a project configured beyond the defaults
    /// (`my_lib.keep_alive` → `keep_alive`): a file that mentions one may hold stream code.
    pub fn configured_names(&self) -> Vec<String> {
        let defaults = ApiModel::default();
        let pairs = [
            (&self.stream_factories, &defaults.stream_factories),
            (&self.stream_contexts, &defaults.stream_contexts),
            (&self.current_stream, &defaults.current_stream),
            (
                &self.record_stream_wrappers,
                &defaults.record_stream_wrappers,
            ),
            (&self.wait_stream_wrappers, &defaults.wait_stream_wrappers),
            (&self.synchronize_functions, &defaults.synchronize_functions),
            (&self.device_modules, &defaults.device_modules),
        ];
        let mut names: Vec<String> = pairs
            .into_iter()
            .flat_map(|(ours, base)| ours.difference(base))
            .filter_map(|n| n.trim_end_matches("()").rsplit('.').next())
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The value an `if` test has on CUDA, when it is one of the fixed predicates (or `not` of
    /// one): code guarded by it is dead there.
    pub fn cuda_truth(&self, test: &Expr, imports: &Imports) -> Option<bool> {
        match test {
            Expr::Operator {
                op: Operator::Not,
                operands,
                ..
            } => self.cuda_truth(operands.first()?, imports).map(|v| !v),
            Expr::Call { func, args, .. } if args.is_empty() => {
                let q = imports.qualify(func)?;
                let (prefix, last) = q.rsplit_once('.')?;
                (FALSE_ON_CUDA.contains(&last) && self.device_modules.contains(prefix))
                    .then_some(false)
            }
            _ => None,
        }
    }

    /// Split a qualified name into (device module, attribute) when its prefix is a device module.
    fn device_attr<'a>(&self, qualified: &'a str) -> Option<&'a str> {
        let (prefix, attr) = qualified.rsplit_once('.')?;
        self.is_device_module(prefix).then_some(attr)
    }

    /// A device module: configured, or what any `get_device_module()` / `get_accelerator()`
    /// helper returns.
    pub fn is_device_module(&self, qualified: &str) -> bool {
        self.device_modules.contains(qualified)
            || ["get_device_module()", "get_accelerator()"]
                .iter()
                .any(|h| {
                    qualified
                        .strip_suffix(h)
                        .is_some_and(|rest| rest.is_empty() || rest.ends_with('.'))
                })
    }

    /// Is `qualified` a `torch` function that makes no tensor and keeps nothing it is given
    /// (`torch.device(..)`, `torch.finfo(dtype)`)? Its result is not a value of the contract.
    pub fn makes_no_tensor(qualified: &str) -> bool {
        qualified
            .strip_prefix("torch.")
            .is_some_and(|rest| NON_TENSOR_FUNCTIONS.contains(&rest))
    }

    /// Classify a call by the qualified name of its callee.
    pub fn classify(&self, qualified: &str) -> Option<ApiCall> {
        let last = qualified.rsplit('.').next().unwrap_or(qualified);
        if self.stream_factories.contains(qualified) {
            return Some(ApiCall::StreamFactory);
        }
        if self.stream_contexts.contains(qualified) {
            return Some(ApiCall::StreamContext);
        }
        // A project's own `current_stream()` (vLLM's caches it per thread instead of asking the
        // runtime each time) is spelled for what it returns.
        if self.current_stream.contains(qualified) || last == "current_stream" {
            return Some(ApiCall::CurrentStream);
        }
        if self.synchronize_functions.contains(qualified) {
            return Some(ApiCall::SynchronizeWrapper);
        }
        if let Some(attr) = self.device_attr(qualified) {
            return match attr {
                "Stream" | "ExternalStream" => Some(ApiCall::StreamFactory),
                "stream" | "StreamContext" => Some(ApiCall::StreamContext),
                "current_stream" => Some(ApiCall::CurrentStream),
                "default_stream" => Some(ApiCall::DefaultStream),
                "set_stream" => Some(ApiCall::SetStream),
                "Event" => Some(ApiCall::EventFactory),
                "synchronize" => Some(ApiCall::DeviceSynchronize),
                // `capture_to_graph(g)` and `replay_graph(g)`: an accelerator's spellings
                // (DeepSpeed's accelerator interface).
                "graph" | "capture_to_graph" => Some(ApiCall::GraphCapture),
                "replay_graph" => Some(ApiCall::GraphReplay),
                "make_graphed_callables" => Some(ApiCall::GraphedCallables),
                // The legacy typed constructors (`torch.cuda.FloatTensor(n)`): device memory.
                typed if typed.ends_with("Tensor") && typed != "Tensor" => {
                    Some(ApiCall::TensorFactory)
                }
                _ => None,
            };
        }
        if qualified.contains("()") {
            // A method of something a call returned: not a module-level function.
            return None;
        }
        if last.ends_with("DataParallel") || last == "fully_shard" {
            return Some(ApiCall::DataParallelWrap);
        }
        if self.record_stream_wrappers.contains(qualified)
            || self.record_stream_wrappers.contains(last)
        {
            return Some(ApiCall::RecordStreamWrapper);
        }
        if self.wait_stream_wrappers.contains(qualified) || self.wait_stream_wrappers.contains(last)
        {
            return Some(ApiCall::WaitStreamWrapper);
        }
        if HOST_COMPARISONS.contains(&qualified) {
            return Some(ApiCall::HostComparison);
        }
        match qualified {
            "torch.Event" => return Some(ApiCall::EventFactory),
            "torch.tensor" | "torch.as_tensor" | "torch.from_numpy" => {
                return Some(ApiCall::TensorFromData)
            }
            _ => {}
        }
        if let Some(rest) = qualified.strip_prefix("torch.distributed.") {
            let function =
                !rest.contains('.') && !rest.starts_with(|c: char| c.is_ascii_uppercase());
            return (function && rest != "barrier").then_some(ApiCall::Collective);
        }
        if let Some(rest) = qualified.strip_prefix("torch.") {
            if TENSOR_FACTORIES.contains(&rest) {
                return Some(ApiCall::TensorFactory);
            }
            let class_like = last.starts_with(|c: char| c.is_ascii_uppercase());
            let not_tensor = NON_TENSOR_FUNCTIONS.contains(&rest)
                || NON_TENSOR_MODULES.iter().any(|m| rest.starts_with(m));
            if class_like || not_tensor {
                return None;
            }
            return Some(ApiCall::TensorOp);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapping_helper_is_known_by_its_last_name() {
        for (qualified, ..) in MAPPING_HELPERS {
            let last = qualified.rsplit('.').next().unwrap();
            assert!(is_mapping_helper_name(last), "{qualified}");
        }
    }

    #[test]
    fn classifies_device_module_spellings() {
        let api = ApiModel::default();
        assert_eq!(
            api.classify("torch.cuda.Stream"),
            Some(ApiCall::StreamFactory)
        );
        assert_eq!(
            api.classify("get_accelerator().current_stream"),
            Some(ApiCall::CurrentStream)
        );
        assert_eq!(
            api.classify("torch.accelerator.set_stream"),
            Some(ApiCall::SetStream)
        );
        assert_eq!(
            api.classify("torch.get_device_module().stream"),
            Some(ApiCall::StreamContext)
        );
        assert_eq!(api.classify("torch.Stream"), Some(ApiCall::StreamFactory));
        assert_eq!(
            api.classify("torch.nn.functional.relu"),
            Some(ApiCall::TensorOp)
        );
        assert_eq!(
            api.classify("torch.distributed.all_reduce"),
            Some(ApiCall::Collective)
        );
        assert_eq!(
            api.classify("torch.zeros_like"),
            Some(ApiCall::TensorFactory)
        );
        assert_eq!(api.classify("numpy.zeros"), None);
        assert_eq!(
            api.classify("torch.cuda.current_stream().wait_stream"),
            None
        );
        assert_eq!(
            api.classify("fairscale.nn.pipe.stream.wait_stream"),
            Some(ApiCall::WaitStreamWrapper)
        );
        assert_eq!(api.classify("torch.cuda.memory_allocated"), None);
        assert_eq!(api.classify("torch.device"), None);
        assert_eq!(
            api.classify("torch.nn.utils.rnn.pad_sequence"),
            Some(ApiCall::TensorOp)
        );
    }
}
