//! The log of every mutation the simulated Discord performed, in order,
//! so that tests can check each job had its effect exactly once.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Effects kept at most; older ones are dropped and counted.
const MAX_EFFECTS: usize = 100_000;

/// One successful mutation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscordEffect {
    /// Its position, from 1, over the sim's life.
    pub seq: u64,
    /// The operation: `create_role`, `delete_role`, `assign_role`,
    /// `remove_role`, `create_channel`, `delete_channel`,
    /// `update_permissions`.
    pub op: String,
    /// The method and path called (under `/api/v10`).
    pub method: String,
    /// The path, ids filled in.
    pub path: String,
    /// The `X-Sluice-Job-Id` header, if sent.
    pub job: Option<String>,
    /// The `X-Audit-Log-Reason` header, if sent.
    pub reason: Option<String>,
    /// The JSON body, if any.
    pub body: Value,
    /// The id of what was created, for creations.
    pub created: Option<String>,
}

/// What `GET /_sim/discord/effects` answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiscordReport {
    /// The effects kept, oldest first.
    pub effects: Vec<DiscordEffect>,
    /// Effects dropped to bound memory.
    pub dropped: u64,
    /// Requests to the Discord API, answered or refused.
    pub requests: u64,
    /// 429s of the global limit.
    pub global_429: u64,
    /// 429s of route buckets.
    pub route_429: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Effects {
    kept: VecDeque<DiscordEffect>,
    next: u64,
    pub dropped: u64,
}

impl Effects {
    pub fn push(&mut self, mut effect: DiscordEffect) {
        self.next += 1;
        effect.seq = self.next;
        if self.kept.len() >= MAX_EFFECTS {
            self.kept.pop_front();
            self.dropped += 1;
        }
        self.kept.push_back(effect);
    }

    pub fn all(&self) -> Vec<DiscordEffect> {
        self.kept.iter().cloned().collect()
    }

    pub fn clear(&mut self) {
        self.kept.clear();
        self.dropped = 0;
    }
}
