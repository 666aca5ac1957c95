//! Tensor methods: reads, writes, views, transfers between host and device, frees.

use super::*;

/// How a tensor staged on an attribute by another method was made.
pub(super) fn staged_production(transfer: bool) -> Production {
    if transfer {
        Production::HostToDevice { non_blocking: true }
    } else {
        Production::Compute
    }
}

/// Methods that give the caller host data to read, as a tensor's `cpu()`, `numpy()` and
/// `tolist()` do: whoever calls them on an object reads the result at once.
const HOST_CONVERSIONS: &[&str] = &["cpu", "numpy", "tolist"];

/// Is `def` a class's conversion to host data (`def cpu(self)`)?
pub(super) fn converts_to_host(def: &FunctionDef) -> bool {
    HOST_CONVERSIONS.contains(&def.name.as_str())
        && def.params.first().is_some_and(|p| p.name == "self")
}

/// Tensor methods that make a new tensor (not views, in-place ops, host reads or stream calls).
pub(super) fn makes_tensor(method: &str) -> bool {
    TENSOR_METHODS.contains(&method)
        && !method.ends_with('_')
        && !HOST_READ_METHODS.contains(&method)
        && !matches!(
            method,
            "record_stream" | "backward" | "data" | "grad" | "split" | "chunk"
        )
}

impl<'a> Lowerer<'a> {
    /// A comparison whose answer the host gets (`torch.equal(a, b)`, `self.assertEqual(a, b)`):
    /// the compared tensors are read on the current stream and the host waits for it.
    pub(super) fn host_compare(&mut self, values: &[Value], span: Span) {
        self.confirm(values);
        let compared = self.tensor_buffers(values);
        if !compared.is_empty() {
            self.host_read(&Value::Tensors(compared), span);
        }
    }

    pub(super) fn tensor_method(
        &mut self,
        recv: Value,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        let vals = self.eval_args(args, keywords);
        self.confirm(std::slice::from_ref(&recv));
        // What a tensor is copied from is a tensor too.
        if method == "copy_" {
            self.confirm(&vals[..vals.len().min(1)]);
        }
        let own = recv.buffers();
        let arg_buffers = self.tensor_buffers(&vals);
        let non_blocking = is_true(self.keyword_arg(keywords, "non_blocking").as_ref())
            || (method == "cuda"
                && matches!(
                    args.get(1),
                    Some(Expr::Constant {
                        value: Constant::Bool(true),
                        ..
                    })
                ));
        let on_device = own
            .iter()
            .all(|b| self.b.body().buffer(*b).memory == Memory::Device);
        let known_device = on_device
            && matches!(recv, Value::Tensors(_))
            && !own.iter().all(|b| self.unplaced.contains(b));
        match method {
            "record_stream" => {
                if let (Some(a), Some(v)) = (args.first(), vals.first()) {
                    if let Some(s) = self.stream_of(v, a) {
                        for &buffer in &own {
                            self.b
                                .push(OpKind::RecordStream { buffer, stream: s }, span);
                        }
                    }
                }
                Value::Unknown
            }
            "cuda" | "to" | "cpu" => {
                let target = match method {
                    "cuda" => Target::Device,
                    "cpu" => Target::Host,
                    _ => match args.first().or_else(|| Expr::keyword(keywords, "device")) {
                        // `.to(other)`: onto `other`'s device.
                        Some(_)
                            if !args.is_empty()
                                && matches!(vals.first(), Some(Value::Tensors(_))) =>
                        {
                            Target::Device
                        }
                        Some(d) => self.target_of(d),
                        None if non_blocking => Target::Device,
                        None => Target::SameDevice,
                    },
                };
                let source = own
                    .first()
                    .map(|b| self.b.body().buffer(*b).name.clone())
                    .unwrap_or_else(|| "tensor".into());
                let name = self.value_name(&source);
                match target {
                    Target::Device if known_device => recv,
                    Target::Device => {
                        let host: Vec<BufferId> =
                            own.iter().copied().filter(|b| self.on_host(*b)).collect();
                        self.copy_access(&host, false, span);
                        let v = self.produce(
                            span,
                            &name,
                            Memory::Device,
                            Production::HostToDevice { non_blocking },
                        );
                        // A blocking copy of host memory synchronizes the current stream.
                        if !non_blocking && !host.is_empty() {
                            self.sync_current(span);
                        }
                        v
                    }
                    Target::Host if !on_device => recv,
                    Target::Host => {
                        self.read_all(&own, span);
                        let memory = if non_blocking {
                            Memory::PinnedHost
                        } else {
                            Memory::PageableHost
                        };
                        let v = self.produce(
                            span,
                            &name,
                            memory,
                            Production::DeviceToHost { non_blocking },
                        );
                        if !non_blocking {
                            self.sync_current(span);
                        }
                        v
                    }
                    Target::SameDevice if known_device || matches!(recv, Value::Param(_)) => {
                        self.read_all(&own, span);
                        self.produce(span, &name, Memory::Device, Production::Compute)
                    }
                    Target::SameDevice => recv,
                }
            }
            // `x.new_empty(n)` takes memory where `x` is, `x.new_zeros(n)` fills it there:
            // neither reads `x`.
            "new_empty" | "new_empty_strided" | "new_zeros" | "new_ones" | "new_full" => {
                let how = if method.starts_with("new_empty") {
                    Production::Allocate
                } else {
                    Production::Compute
                };
                self.produce_like(&own, how, span)
            }
            "pin_memory" => {
                let name = self.value_name("pinned");
                self.produce(span, &name, Memory::PinnedHost, Production::Host)
            }
            "untyped_storage" | "storage" => Value::Storage(own),
            "copy_" => {
                let from_device = arg_buffers.iter().any(|b| !self.on_host(*b));
                let to_device = own.iter().any(|b| !self.on_host(*b));
                let from_host = arg_buffers.iter().any(|b| self.on_host(*b));
                let to_host = own.iter().any(|b| self.on_host(*b));
                // Only a copy that touches host memory is a transfer; device to device is an
                // ordinary kernel on the current stream, asynchronous to the host whatever
                // `non_blocking` says.
                if (from_device && to_host) || (from_host && to_device) {
                    // A transfer: the copy engine reads and writes host memory on the stream.
                    self.copy_access(&arg_buffers, false, span);
                    self.copy_access(&own, true, span);
                    // Into pageable memory the copy completes before the call returns.
                    let into_pageable = own
                        .iter()
                        .all(|b| self.b.body().buffer(*b).memory == Memory::PageableHost);
                    if !non_blocking || (from_device && into_pageable) {
                        self.sync_current(span);
                    }
                } else {
                    self.read_all(&arg_buffers, span);
                    self.write_all(&own, span);
                }
                recv
            }
            "backward" => {
                self.read_all(&own, span);
                let grads =
                    self.buffer_at(span, "grad", "gradients", Memory::Device, Owner::Caller);
                self.b.push(
                    OpKind::Produce {
                        buffer: grads,
                        stream: self.current,
                        how: Production::Compute,
                    },
                    span,
                );
                self.env
                    .insert(GRADIENTS.into(), Value::Tensors(vec![grads]));
                Value::Unknown
            }
            // A numpy array shares the tensor's memory: reading happens where it is used.
            "numpy" => recv,
            m if HOST_READ_METHODS.contains(&m) => {
                self.host_read(&recv, span);
                Value::Unknown
            }
            m if VIEW_METHODS.contains(&m) => recv,
            m if METADATA_METHODS.contains(&m) => Value::Unknown,
            m if m.ends_with('_') && !m.starts_with('_') => {
                self.read_all(&arg_buffers, span);
                self.write_all(&own, span);
                recv
            }
            _ => {
                let mut inputs = own;
                inputs.extend(arg_buffers);
                self.read_all(&inputs, span);
                let result = self.produce_result(&inputs, span);
                if DATA_DEPENDENT_SHAPES.contains(&method) {
                    self.sync_current(span);
                }
                result
            }
        }
    }
}

/// The names whose residence a condition tests: `t.is_cuda`, `t.is_cpu`, `t.device == d`,
/// `t.device.type in ("cuda", "npu")`, through `and`, `or` and `not`.
fn device_tested_names<'e>(test: &'e Expr, out: &mut Vec<&'e str>) {
    // `t.device` or `t.device.type`, for a name `t`.
    let receiver = |e: &'e Expr| {
        let device = match e {
            Expr::Attribute { value, attr, .. } if attr == "type" => value.as_ref(),
            other => other,
        };
        match device {
            Expr::Attribute { value, attr, .. } if attr == "device" => match value.as_ref() {
                Expr::Name { id, .. } => Some(id.as_str()),
                _ => None,
            },
            _ => None,
        }
    };
    match test {
        Expr::Attribute { value, attr, .. } if attr == "is_cuda" || attr == "is_cpu" => {
            if let Expr::Name { id, .. } = value.as_ref() {
                out.push(id);
            }
        }
        Expr::Operator {
            op: Operator::Arithmetic | Operator::Identity,
            operands,
            ..
        } => out.extend(operands.iter().filter_map(receiver)),
        Expr::Operator {
            op: Operator::And | Operator::Or | Operator::Not,
            operands,
            ..
        } => operands.iter().for_each(|o| device_tested_names(o, out)),
        _ => {}
    }
}

impl<'a> Lowerer<'a> {
    /// A condition that tests where values live: past it, the code has decided for each
    /// whether it is device memory (see `OpKind::DeviceTest`).
    pub(super) fn note_device_tests(&mut self, test: &Expr, span: Span) {
        let mut names = Vec::new();
        device_tested_names(test, &mut names);
        for name in names {
            let buffers = match self.env.get(name) {
                Some(v) => v.buffers(),
                None => continue,
            };
            for buffer in buffers {
                self.b.push(OpKind::DeviceTest { buffer }, span);
            }
        }
    }

    /// `obj._to(device="cpu", non_blocking=True)` on an object the analysis does not follow (a
    /// TensorDict, a dataclass of tensors, the object's own transfer helper): a transfer method
    /// (`to`, `cpu`, `to_*`, `*_to`, or one named for moving, copying, transferring or
    /// offloading) asking for a non-blocking copy to the host returns host memory the current
    /// stream is still filling. Other methods given the
    /// same arguments (`_get_to_kwargs(device="cpu", non_blocking=True)`) only pass them on.
    pub(super) fn host_transfer_call(
        &mut self,
        receiver: &Value,
        method: &str,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Option<Value> {
        let method = method.trim_start_matches('_');
        let transfer = matches!(method, "to" | "cpu")
            || method.starts_with("to_")
            || method.ends_with("_to")
            || ["move", "copy", "transfer", "offload"]
                .iter()
                .any(|w| method.contains(w));
        if !transfer || !is_true(self.keyword_arg(keywords, "non_blocking").as_ref()) {
            return None;
        }
        let device = Expr::keyword(keywords, "device").or(args.first())?;
        if self.target_of(device) != Target::Host {
            return None;
        }
        let sources: Vec<BufferId> = self
            .tensor_buffers(std::slice::from_ref(receiver))
            .into_iter()
            .filter(|b| !self.on_host(*b))
            .collect();
        self.read_all(&sources, span);
        let name = self.value_name("result");
        Some(self.produce(
            span,
            &name,
            Memory::PinnedHost,
            Production::DeviceToHost { non_blocking: true },
        ))
    }

    /// Does the value hold host memory only (a pinned buffer, a host/device pair's host side)?
    pub(super) fn holds_host_memory(&self, value: &Value) -> bool {
        let buffers = value.local_tensors();
        !buffers.is_empty() && buffers.iter().all(|b| self.on_host(*b))
    }

    /// `pair.copy_to_gpu()` on a host/device buffer pair: a non-blocking copy on the current
    /// stream reads its host memory.
    pub(super) fn pair_copy_to_device(&mut self, pair: &Value, span: Span) {
        let host = pair.local_tensors();
        self.copy_access(&host, false, span);
    }

    /// A method of the class called on `self`, from its summary: the host/device pairs it sends
    /// to the device are read by copies still pending when it returns, and the host memory of
    /// the pairs it is given and writes is written on the host.
    pub(super) fn pair_effects_of_method(
        &mut self,
        summary: &crate::summary::MethodSummary,
        vals: &[Value],
        positional: usize,
        span: Span,
    ) {
        for pair in &summary.copies_to_device {
            let value = match self.env.get(pair.as_str()) {
                Some(v) => Some(v.clone()),
                None => self.class_attribute(pair, span),
            };
            if let Some(v) = value.filter(|v| self.holds_host_memory(v)) {
                self.pair_copy_to_device(&v, span);
            }
        }
        for &i in &summary.writes_host_of {
            if let Some(v) = vals.get(i).filter(|_| i < positional) {
                if self.holds_host_memory(v) {
                    let host = v.local_tensors();
                    self.write_all(&host, span);
                }
            }
        }
    }
}
