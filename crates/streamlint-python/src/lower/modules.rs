//! `nn.Module`s as device values. A module moved in place (`model.cuda()`, `model.to(device)`,
//! also each module of a list moved in a loop) holds device tensors: its parameters. A
//! data-parallel wrapper (`DistributedDataParallel(model)`, FSDP, `fully_shard(model)`) is device
//! work on those tensors: its constructor broadcasts them from one rank, or flattens and shards
//! them, on the current stream, and the wrapper holds them.

use super::*;

/// Module methods that move or cast the module's tensors in place and return the module.
const IN_PLACE_MOVES: &[&str] = &["cuda", "to", "to_empty", "npu", "xpu"];

impl<'a> Lowerer<'a> {
    /// `model.cuda(device)` as a statement: on a tensor the result would be thrown away, so
    /// the receiver is a module, moved in place. The name (and, in a loop over a list of
    /// modules, the list's items) holds the module's device tensors from here: the work other
    /// streams do on them is judged. Their order is judged, not their lifetime: the module,
    /// not this function, frees them.
    pub(super) fn moved_module(&mut self, statement: &Expr) -> bool {
        let Expr::Call {
            func,
            args,
            keywords,
            span,
        } = statement
        else {
            return false;
        };
        let Expr::Attribute { value, attr, .. } = func.as_ref() else {
            return false;
        };
        let Expr::Name { id, .. } = value.as_ref() else {
            return false;
        };
        // Not a value known to be a tensor: `x.to(device)` thrown away does nothing to `x`.
        let untracked = match self.env.get(id.as_str()) {
            Some(Value::Unknown) => true,
            Some(Value::Param(b)) => !self.confirmed.contains(b),
            _ => false,
        };
        if !IN_PLACE_MOVES.contains(&attr.as_str()) || !untracked {
            return false;
        }
        self.eval_args(args, keywords);
        let buffer = self.buffer_at(*span, "moved-module", id, Memory::Device, Owner::Caller);
        self.unplaced.insert(buffer);
        // A blocking move is done when it returns: it copies host memory and waits, or finds
        // the tensors on the device already and does nothing. Only a non-blocking one leaves
        // work queued on the current stream. Where the tensors' memory comes from is not
        // claimed either way: the module frees it, and no `record_stream` of a module exists.
        let (stream, how) = if is_true(Expr::keyword(keywords, "non_blocking")) {
            (self.current, Production::Call)
        } else {
            (self.b.ambient(), Production::Host)
        };
        self.b.push(
            OpKind::Produce {
                buffer,
                stream,
                how,
            },
            *span,
        );
        let module = Value::Tensors(vec![buffer]);
        if let Some((_, list)) = self.iterated.iter().rev().find(|(name, _)| name == id) {
            let list = list.clone();
            self.bind(list, Value::Group(vec![module.clone()]));
        }
        self.bind(id.clone(), module);
        true
    }

    /// `DistributedDataParallel(module=model)`: the module (the `module` keyword, or the first
    /// positional argument) is read and written on the current stream; the wrapper holds it.
    pub(super) fn data_parallel_wrap(
        &mut self,
        args: &[Expr],
        keywords: &[Keyword],
        span: Span,
    ) -> Value {
        let vals = self.eval_args(args, keywords);
        let module = match keywords
            .iter()
            .position(|k| k.name.as_deref() == Some("module"))
        {
            Some(k) => vals.get(args.len() + k),
            None => vals.first().filter(|_| !args.is_empty()),
        };
        let Some(module) = module.cloned() else {
            return Value::Unknown;
        };
        self.confirm(std::slice::from_ref(&module));
        let tensors = self.tensor_buffers(std::slice::from_ref(&module));
        self.read_all(&tensors, span);
        self.write_all(&tensors, span);
        Value::tensors(tensors)
    }
}
