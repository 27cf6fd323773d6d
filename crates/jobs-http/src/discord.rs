//! The seven Discord operations of the seed's synthesis engine, as job
//! kinds with typed payloads, run against Discord's REST API under its
//! global and per-route rate limits.
//!
//! Every call takes one unit of the limiter resource `api:discord` (the
//! global bucket, seed: 50/s) and waits on Discord's per-route bucket as
//! learned from `X-RateLimit-Bucket`, `-Remaining` and `-Reset-After`, so
//! that it waits instead of drawing a 429. A 429 with
//! `X-RateLimit-Global: true` (or `"global": true`) is counted in
//! `sluice_jobs_global_429_total` and logged as critical.

mod buckets;
mod handler;
mod payload;

pub use handler::{DiscordConfig, DiscordHandler};

pub use payload::{
    Call, ChannelType, Color, CreateChannel, CreateRole, DeleteChannel, DeleteRole, MemberRole,
    Name, Operation, OverwriteType, Permissions, Reason, Snowflake, Topic, UpdatePermissions,
};

/// Creates a role: `{"guild_id", "name", "permissions"?, "color"?, "hoist"?, "mentionable"?, "reason"?}`.
pub const CREATE_ROLE: &str = "discord.create_role";
/// Deletes a role: `{"guild_id", "role_id", "reason"?}`.
pub const DELETE_ROLE: &str = "discord.delete_role";
/// Gives a member a role: `{"guild_id", "user_id", "role_id", "reason"?}`.
pub const ASSIGN_ROLE: &str = "discord.assign_role";
/// Takes a role from a member: `{"guild_id", "user_id", "role_id", "reason"?}`.
pub const REMOVE_ROLE: &str = "discord.remove_role";
/// Creates a channel: `{"guild_id", "name", "type"?, "topic"?, "parent_id"?, "position"?, "nsfw"?, "reason"?}`.
pub const CREATE_CHANNEL: &str = "discord.create_channel";
/// Deletes a channel: `{"channel_id", "reason"?}`.
pub const DELETE_CHANNEL: &str = "discord.delete_channel";
/// Sets a channel permission overwrite: `{"channel_id", "overwrite_id", "type", "allow"?, "deny"?, "reason"?}`.
pub const UPDATE_PERMISSIONS: &str = "discord.update_permissions";
