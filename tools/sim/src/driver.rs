//! Runs a [`crate::workload::Workload`] on the engine: every transfer is one message
//! posted on the connection (flow) of its (src, dst) pair once its start time has come
//! and every transfer it waits for is complete at its destination, as a collective
//! library posts work on long-lived QPs/connections.
//!
//! A flow's messages complete in order at its receiver (one stream for MetaRoCE, one QP
//! for RoCEv2/IRN), so a transfer is complete when the receiver's completed-message
//! count reaches the count it had when the transfer was posted, plus one. The engine
//! calls [`Driver::completed`] after every delivery to a workload flow's receiver and
//! posts what it returns.

use crate::workload::Transfer;
use std::collections::VecDeque;

pub struct Driver {
    pub transfers: Vec<Transfer>,
    /// Per transfer: the flow that carries it.
    pub flow: Vec<usize>,
    /// Per transfer: transfers it still waits for.
    waiting: Vec<usize>,
    /// Per transfer: transfers that wait for it.
    children: Vec<Vec<usize>>,
    /// Per flow: posted transfers not yet complete, with the completed-message count
    /// that completes each.
    open: Vec<VecDeque<(u64, usize)>>,
    /// Per flow: messages posted so far.
    posted: Vec<u64>,
    /// Per transfer: when it was posted / completed, ns.
    pub posted_at: Vec<Option<u64>>,
    pub done_at: Vec<Option<u64>>,
}

impl Driver {
    /// `flow_of[i]`: the flow carrying transfer `i`; `flows`: how many flows exist.
    pub fn new(transfers: Vec<Transfer>, flow_of: Vec<usize>, flows: usize) -> Driver {
        assert_eq!(transfers.len(), flow_of.len());
        let n = transfers.len();
        let mut children = vec![Vec::new(); n];
        let mut waiting = vec![0; n];
        for t in &transfers {
            for &a in &t.after {
                assert!(a < t.id, "after names an earlier transfer");
                children[a].push(t.id);
            }
            waiting[t.id] = t.after.len();
        }
        Driver {
            transfers,
            flow: flow_of,
            waiting,
            children,
            open: vec![VecDeque::new(); flows],
            posted: vec![0; flows],
            posted_at: vec![None; n],
            done_at: vec![None; n],
        }
    }

    /// Transfers with nothing to wait for: (index, start time).
    pub fn roots(&self) -> Vec<(usize, u64)> {
        (0..self.transfers.len())
            .filter(|&i| self.waiting[i] == 0)
            .map(|i| (i, self.transfers[i].start_ns))
            .collect()
    }

    /// Transfer `i` is posted at `now` on its flow: returns (flow, bytes).
    pub fn post(&mut self, i: usize, now: u64) -> (usize, u64) {
        let f = self.flow[i];
        self.posted[f] += 1;
        self.open[f].push_back((self.posted[f], i));
        self.posted_at[i] = Some(now);
        (f, self.transfers[i].bytes)
    }

    /// Flow `f`'s receiver has completed `msgs` messages at `now`: marks the transfers
    /// this completes and returns those that may start now or later (index, start).
    pub fn completed(&mut self, f: usize, msgs: u64, now: u64) -> Vec<(usize, u64)> {
        let mut ready = Vec::new();
        while let Some(&(need, i)) = self.open[f].front() {
            if msgs < need {
                break;
            }
            self.open[f].pop_front();
            self.done_at[i] = Some(now);
            for k in 0..self.children[i].len() {
                let c = self.children[i][k];
                self.waiting[c] -= 1;
                if self.waiting[c] == 0 {
                    ready.push((c, self.transfers[c].start_ns));
                }
            }
        }
        ready
    }

    /// Whether every transfer completed.
    pub fn all_done(&self) -> bool {
        self.done_at.iter().all(Option::is_some)
    }

    /// Completion time of a group: last completion minus first start time (ns).
    pub fn group_time(&self, group: u32) -> Option<u64> {
        let mut start = u64::MAX;
        let mut end = 0;
        for (i, t) in self.transfers.iter().enumerate() {
            if t.group != group {
                continue;
            }
            start = start.min(t.start_ns);
            end = end.max(self.done_at[i]?);
        }
        (start != u64::MAX).then(|| end.saturating_sub(start))
    }

    /// Per-transfer completion times (done − posted), ns, of the finished ones.
    pub fn fcts(&self) -> Vec<u64> {
        self.posted_at
            .iter()
            .zip(&self.done_at)
            .filter_map(|(p, d)| Some(d.as_ref()? - p.as_ref()?))
            .collect()
    }
}
