//! A set of device accesses (identified by the op that performed them), as a bitset.
//!
//! Each stream's happens-before knowledge is the set of accesses it is ordered after. This is the
//! vector clock of the run-time model, with one component per access instead of one per stream:
//! it lets a loop's second instance of an access remove the first one (see `State::access`).

use crate::ir::OpId;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessSet {
    words: Vec<u64>,
}

impl AccessSet {
    pub const fn new() -> Self {
        AccessSet { words: Vec::new() }
    }

    pub fn contains(&self, op: OpId) -> bool {
        let i = op.index();
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    pub fn insert(&mut self, op: OpId) {
        let i = op.index();
        if self.words.len() <= i / 64 {
            self.words.resize(i / 64 + 1, 0);
        }
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn remove(&mut self, op: OpId) {
        let i = op.index();
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    pub fn union_with(&mut self, other: &AccessSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    pub fn intersect_with(&mut self, other: &AccessSet) {
        self.words.truncate(other.words.len());
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    /// Meet of two paths' ordering knowledge. An access is known as ordered after the join if
    /// each path either knows it as ordered or never performed it (then ordering is vacuous).
    pub fn meet_ordered(
        &mut self,
        performed: &AccessSet,
        other: &AccessSet,
        other_performed: &AccessSet,
    ) {
        let n = self.words.len().max(other.words.len());
        let word = |set: &AccessSet, i: usize| set.words.get(i).copied().unwrap_or(0);
        let merged = (0..n)
            .map(|i| {
                let (a, b) = (word(self, i), word(other, i));
                (a & b) | (a & !word(other_performed, i)) | (b & !word(performed, i))
            })
            .collect();
        self.words = merged;
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let mut a = AccessSet::default();
        a.insert(OpId(3));
        a.insert(OpId(130));
        assert!(a.contains(OpId(3)) && a.contains(OpId(130)) && !a.contains(OpId(4)));
        let mut b = AccessSet::default();
        b.insert(OpId(3));
        let mut i = a.clone();
        i.intersect_with(&b);
        assert!(i.contains(OpId(3)) && !i.contains(OpId(130)));
        let mut m = AccessSet::default();
        m.insert(OpId(7));
        let performed_m = m.clone();
        m.meet_ordered(&performed_m, &AccessSet::default(), &AccessSet::default());
        assert!(
            m.contains(OpId(7)),
            "not performed on the other path: vacuously ordered"
        );
        let mut m2 = performed_m.clone();
        m2.meet_ordered(&performed_m, &AccessSet::default(), &performed_m);
        assert!(
            !m2.contains(OpId(7)),
            "performed but not ordered on the other path"
        );
        b.union_with(&a);
        assert_eq!(b, a);
        a.remove(OpId(3));
        a.remove(OpId(130));
        assert!(a.is_empty());
    }
}
