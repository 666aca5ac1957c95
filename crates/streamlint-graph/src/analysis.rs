//! The fixed-point computation over a body's control-flow graph, and the final walk that shows
//! every op together with the state that reaches it.

use crate::ir::{BlockId, Body, Op, OpId};
use crate::state::State;

/// How many times one block may be re-analysed before the loop is cut off. Real functions reach
/// their fixed point in two or three rounds; the cap only bounds pathological inputs.
const MAX_VISITS_PER_BLOCK: usize = 32;

/// The states leaving each block of one body, at the fixed point. The state reaching a block is
/// not kept but met again from its predecessors' when the block is walked: a state holds many
/// maps, and the fixed point would otherwise copy each block's twice per visit.
pub struct Analysis<'b> {
    body: &'b Body,
    order: Vec<BlockId>,
    preds: Vec<Vec<BlockId>>,
    exit_states: Vec<Option<State>>,
}

/// The state reaching `block`: the empty state at the entry, else the meet of the states leaving
/// its predecessors analysed so far (`None` while none is).
fn entry_state(
    body: &Body,
    preds: &[Vec<BlockId>],
    exit_states: &[Option<State>],
    block: BlockId,
) -> Option<State> {
    if block == body.entry {
        return Some(State::default());
    }
    let mut state: Option<State> = None;
    for p in &preds[block.index()] {
        if let Some(ps) = &exit_states[p.index()] {
            match &mut state {
                Some(s) => s.meet(ps),
                None => state = Some(ps.clone()),
            }
        }
    }
    state
}

impl<'b> Analysis<'b> {
    /// Run the dataflow to a fixed point.
    pub fn run(body: &'b Body) -> Self {
        let order = reverse_postorder(body);
        let mut rank = vec![usize::MAX; body.blocks.len()];
        for (i, b) in order.iter().enumerate() {
            rank[b.index()] = i;
        }
        let preds = body.predecessors();
        let mut exit_states: Vec<Option<State>> = vec![None; body.blocks.len()];
        let mut visits = vec![0usize; body.blocks.len()];
        let mut dirty = vec![false; body.blocks.len()];
        dirty[body.entry.index()] = true;
        // Sweep in reverse postorder until nothing changes; each sweep handles loops' back edges.
        loop {
            let mut changed = false;
            for &block in &order {
                if !dirty[block.index()] || visits[block.index()] >= MAX_VISITS_PER_BLOCK {
                    continue;
                }
                dirty[block.index()] = false;
                visits[block.index()] += 1;
                let Some(mut out) = entry_state(body, &preds, &exit_states, block) else {
                    continue;
                };
                for &op in &body.blocks[block.index()].ops {
                    out.apply(body, op);
                }
                if exit_states[block.index()].as_ref() != Some(&out) {
                    exit_states[block.index()] = Some(out);
                    changed = true;
                    for s in &body.blocks[block.index()].succs {
                        dirty[s.index()] = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Analysis {
            body,
            order,
            preds,
            exit_states,
        }
    }

    /// Can control come back to `op` (is it inside a loop)?
    pub fn in_cycle(&self, op: OpId) -> bool {
        let Some(block) = self.body.blocks.iter().position(|b| b.ops.contains(&op)) else {
            return false;
        };
        let start = BlockId(block as u32);
        let mut seen = vec![false; self.body.blocks.len()];
        let mut stack: Vec<BlockId> = self.body.blocks[block].succs.clone();
        while let Some(b) = stack.pop() {
            if b == start {
                return true;
            }
            if !std::mem::replace(&mut seen[b.index()], true) {
                stack.extend(self.body.blocks[b.index()].succs.iter().copied());
            }
        }
        false
    }

    /// The state where the body ends: the meet of the states leaving its blocks that have no
    /// successor (what holds on every path to the end).
    pub fn end_state(&self) -> Option<State> {
        let mut end: Option<State> = None;
        for (block, out) in self.body.blocks.iter().zip(&self.exit_states) {
            let (true, Some(out)) = (block.succs.is_empty(), out) else {
                continue;
            };
            match &mut end {
                Some(s) => s.meet(out),
                None => end = Some(out.clone()),
            }
        }
        end
    }

    /// Visit every reachable op once, in control-flow order, with the state just before it.
    pub fn walk(&self, mut visit: impl FnMut(OpId, &Op, &State)) {
        for &block in &self.order {
            let entry = entry_state(self.body, &self.preds, &self.exit_states, block);
            let Some(mut state) = entry else {
                continue;
            };
            for &op in &self.body.blocks[block.index()].ops {
                visit(op, self.body.op(op), &state);
                state.apply(self.body, op);
            }
        }
    }
}

fn reverse_postorder(body: &Body) -> Vec<BlockId> {
    let n = body.blocks.len();
    let mut seen = vec![false; n];
    let mut post = Vec::with_capacity(n);
    // Iterative DFS: (block, next successor index).
    let mut stack = vec![(body.entry, 0usize)];
    seen[body.entry.index()] = true;
    while let Some((block, i)) = stack.last_mut() {
        let succs = &body.blocks[block.index()].succs;
        if let Some(&next) = succs.get(*i) {
            *i += 1;
            if !seen[next.index()] {
                seen[next.index()] = true;
                stack.push((next, 0));
            }
        } else {
            post.push(*block);
            stack.pop();
        }
    }
    post.reverse();
    post
}
