//! The typed, validated payloads of the Discord kinds and the REST call
//! each becomes.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::payload::{PayloadError, decode};

/// A Discord id: a string of 1 to 20 ASCII digits that fits in 64 bits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Snowflake(String);

impl TryFrom<String> for Snowflake {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{s:?} is not a snowflake id (a string of 1 to 20 digits)"
            ));
        }
        s.parse::<u64>()
            .map_err(|_| format!("{s:?} is not a snowflake id (larger than 64 bits)"))?;
        Ok(Self(s))
    }
}

impl From<Snowflake> for String {
    fn from(s: Snowflake) -> String {
        s.0
    }
}

impl fmt::Display for Snowflake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A role or channel name: 1 to 100 characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

impl TryFrom<String> for Name {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        match s.chars().count() {
            0 => Err("must not be empty".to_owned()),
            1..=100 => Ok(Self(s)),
            n => Err(format!("is {n} characters long; at most 100 are allowed")),
        }
    }
}

impl From<Name> for String {
    fn from(s: Name) -> String {
        s.0
    }
}

/// An audit-log reason, sent as `X-Audit-Log-Reason`: 1 to 512 characters
/// without control characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Reason(String);

impl TryFrom<String> for Reason {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        let n = s.chars().count();
        if n == 0 || n > 512 {
            return Err(format!("is {n} characters long; 1 to 512 are allowed"));
        }
        if s.chars().any(char::is_control) {
            return Err("must not contain control characters".to_owned());
        }
        Ok(Self(s))
    }
}

impl From<Reason> for String {
    fn from(s: Reason) -> String {
        s.0
    }
}

impl Reason {
    /// The reason's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A permission bit set, as Discord writes it: a decimal string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Permissions(String);

impl TryFrom<String> for Permissions {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.parse::<u128>().is_err() {
            return Err(format!(
                "{s:?} is not a permission bit set (a decimal string)"
            ));
        }
        Ok(Self(s))
    }
}

impl From<Permissions> for String {
    fn from(s: Permissions) -> String {
        s.0
    }
}

/// A role colour: an RGB value up to `0xFFFFFF`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Color(u32);

impl TryFrom<u32> for Color {
    type Error = String;

    fn try_from(n: u32) -> Result<Self, String> {
        if n > 0xFF_FFFF {
            return Err(format!("{n} is not an RGB colour (at most 16777215)"));
        }
        Ok(Self(n))
    }
}

impl From<Color> for u32 {
    fn from(c: Color) -> u32 {
        c.0
    }
}

/// A channel type Discord lets a bot create: 0 text, 2 voice, 4 category,
/// 5 announcement, 13 stage, 15 forum, 16 media.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct ChannelType(u8);

impl TryFrom<u8> for ChannelType {
    type Error = String;

    fn try_from(n: u8) -> Result<Self, String> {
        match n {
            0 | 2 | 4 | 5 | 13 | 15 | 16 => Ok(Self(n)),
            _ => Err(format!(
                "{n} is not a channel type a bot can create (0, 2, 4, 5, 13, 15 or 16)"
            )),
        }
    }
}

impl From<ChannelType> for u8 {
    fn from(c: ChannelType) -> u8 {
        c.0
    }
}

/// Whom a permission overwrite is for: 0 a role, 1 a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct OverwriteType(u8);

impl TryFrom<u8> for OverwriteType {
    type Error = String;

    fn try_from(n: u8) -> Result<Self, String> {
        match n {
            0 | 1 => Ok(Self(n)),
            _ => Err(format!("{n} is not an overwrite type (0 role, 1 member)")),
        }
    }
}

impl From<OverwriteType> for u8 {
    fn from(c: OverwriteType) -> u8 {
        c.0
    }
}

/// `discord.create_role`: `POST /guilds/{guild_id}/roles`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Discord's own field names
pub struct CreateRole {
    pub guild_id: Snowflake,
    pub name: Name,
    pub permissions: Option<Permissions>,
    pub color: Option<Color>,
    pub hoist: Option<bool>,
    pub mentionable: Option<bool>,
    pub reason: Option<Reason>,
}

/// `discord.delete_role`: `DELETE /guilds/{guild_id}/roles/{role_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct DeleteRole {
    pub guild_id: Snowflake,
    pub role_id: Snowflake,
    pub reason: Option<Reason>,
}

/// `discord.assign_role` (`PUT`) and `discord.remove_role` (`DELETE`):
/// `/guilds/{guild_id}/members/{user_id}/roles/{role_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct MemberRole {
    pub guild_id: Snowflake,
    pub user_id: Snowflake,
    pub role_id: Snowflake,
    pub reason: Option<Reason>,
}

/// `discord.create_channel`: `POST /guilds/{guild_id}/channels`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct CreateChannel {
    pub guild_id: Snowflake,
    pub name: Name,
    /// Discord's `type`; text (0) when absent.
    #[serde(rename = "type")]
    pub channel_type: Option<ChannelType>,
    pub topic: Option<Topic>,
    pub parent_id: Option<Snowflake>,
    pub position: Option<u32>,
    pub nsfw: Option<bool>,
    pub reason: Option<Reason>,
}

/// A channel topic: at most 1024 characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Topic(String);

impl TryFrom<String> for Topic {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        let n = s.chars().count();
        if n > 1024 {
            return Err(format!("is {n} characters long; at most 1024 are allowed"));
        }
        Ok(Self(s))
    }
}

impl From<Topic> for String {
    fn from(s: Topic) -> String {
        s.0
    }
}

/// `discord.delete_channel`: `DELETE /channels/{channel_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct DeleteChannel {
    pub channel_id: Snowflake,
    pub reason: Option<Reason>,
}

/// `discord.update_permissions`:
/// `PUT /channels/{channel_id}/permissions/{overwrite_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct UpdatePermissions {
    pub channel_id: Snowflake,
    /// The role or member the overwrite is for.
    pub overwrite_id: Snowflake,
    /// Discord's `type`: 0 role, 1 member.
    #[serde(rename = "type")]
    pub overwrite_type: OverwriteType,
    pub allow: Option<Permissions>,
    pub deny: Option<Permissions>,
    pub reason: Option<Reason>,
}

/// One Discord operation, parsed from a job's kind and payload.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Operation {
    CreateRole(CreateRole),
    DeleteRole(DeleteRole),
    AssignRole(MemberRole),
    RemoveRole(MemberRole),
    CreateChannel(CreateChannel),
    DeleteChannel(DeleteChannel),
    UpdatePermissions(UpdatePermissions),
}

/// The REST call an [`Operation`] becomes.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// The path under `/api/v10`, ids filled in.
    pub path: String,
    /// The rate-limit route: method and path with every id but the major
    /// one (guild or channel) replaced by `:id`, as Discord buckets it.
    pub route: String,
    /// The major parameter (guild or channel id) Discord counts per.
    pub major: String,
    /// The JSON body, if the call has one.
    pub body: Option<Value>,
    /// Sent as `X-Audit-Log-Reason`.
    pub reason: Option<String>,
}

impl Operation {
    /// Parses `payload` for `kind`; `None` if `kind` is not a Discord kind.
    pub fn parse(kind: &str, payload: &Value) -> Option<Result<Operation, PayloadError>> {
        Some(match kind {
            super::CREATE_ROLE => decode(payload).map(Operation::CreateRole),
            super::DELETE_ROLE => decode(payload).map(Operation::DeleteRole),
            super::ASSIGN_ROLE => decode(payload).map(Operation::AssignRole),
            super::REMOVE_ROLE => decode(payload).map(Operation::RemoveRole),
            super::CREATE_CHANNEL => decode(payload).map(Operation::CreateChannel),
            super::DELETE_CHANNEL => decode(payload).map(Operation::DeleteChannel),
            super::UPDATE_PERMISSIONS => decode(payload).map(Operation::UpdatePermissions),
            _ => return None,
        })
    }

    /// The REST call that performs the operation.
    pub fn call(&self) -> Call {
        let reason = |r: &Option<Reason>| r.as_ref().map(|r| r.as_str().to_owned());
        match self {
            Operation::CreateRole(p) => {
                let mut body = Map::new();
                body.insert("name".into(), json!(p.name));
                put_some(&mut body, "permissions", &p.permissions);
                put_some(&mut body, "color", &p.color);
                put_some(&mut body, "hoist", &p.hoist);
                put_some(&mut body, "mentionable", &p.mentionable);
                Call {
                    method: "POST",
                    path: format!("/guilds/{}/roles", p.guild_id),
                    route: format!("POST /guilds/{}/roles", p.guild_id),
                    major: p.guild_id.to_string(),
                    body: Some(Value::Object(body)),
                    reason: reason(&p.reason),
                }
            }
            Operation::DeleteRole(p) => Call {
                method: "DELETE",
                path: format!("/guilds/{}/roles/{}", p.guild_id, p.role_id),
                route: format!("DELETE /guilds/{}/roles/:id", p.guild_id),
                major: p.guild_id.to_string(),
                body: None,
                reason: reason(&p.reason),
            },
            Operation::AssignRole(p) | Operation::RemoveRole(p) => {
                let method = if matches!(self, Operation::AssignRole(_)) {
                    "PUT"
                } else {
                    "DELETE"
                };
                Call {
                    method,
                    path: format!(
                        "/guilds/{}/members/{}/roles/{}",
                        p.guild_id, p.user_id, p.role_id
                    ),
                    route: format!("{method} /guilds/{}/members/:id/roles/:id", p.guild_id),
                    major: p.guild_id.to_string(),
                    body: None,
                    reason: reason(&p.reason),
                }
            }
            Operation::CreateChannel(p) => {
                let mut body = Map::new();
                body.insert("name".into(), json!(p.name));
                put_some(&mut body, "type", &p.channel_type);
                put_some(&mut body, "topic", &p.topic);
                put_some(&mut body, "parent_id", &p.parent_id);
                put_some(&mut body, "position", &p.position);
                put_some(&mut body, "nsfw", &p.nsfw);
                Call {
                    method: "POST",
                    path: format!("/guilds/{}/channels", p.guild_id),
                    route: format!("POST /guilds/{}/channels", p.guild_id),
                    major: p.guild_id.to_string(),
                    body: Some(Value::Object(body)),
                    reason: reason(&p.reason),
                }
            }
            Operation::DeleteChannel(p) => Call {
                method: "DELETE",
                path: format!("/channels/{}", p.channel_id),
                route: format!("DELETE /channels/{}", p.channel_id),
                major: p.channel_id.to_string(),
                body: None,
                reason: reason(&p.reason),
            },
            Operation::UpdatePermissions(p) => {
                let mut body = Map::new();
                body.insert("type".into(), json!(p.overwrite_type));
                put_some(&mut body, "allow", &p.allow);
                put_some(&mut body, "deny", &p.deny);
                Call {
                    method: "PUT",
                    path: format!("/channels/{}/permissions/{}", p.channel_id, p.overwrite_id),
                    route: format!("PUT /channels/{}/permissions/:id", p.channel_id),
                    major: p.channel_id.to_string(),
                    body: Some(Value::Object(body)),
                    reason: reason(&p.reason),
                }
            }
        }
    }
}

fn put_some<T: Serialize>(body: &mut Map<String, Value>, key: &str, value: &Option<T>) {
    if let Some(v) = value {
        body.insert(key.to_owned(), json!(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: &str, payload: Value) -> PayloadError {
        Operation::parse(kind, &payload).unwrap().unwrap_err()
    }

    #[test]
    fn errors_name_the_field() {
        let e = err("discord.create_role", json!({"guild_id": "1"}));
        assert_eq!(e.field, "payload.name", "{e}");
        let e = err(
            "discord.create_role",
            json!({"guild_id": "1", "name": "a", "colour": 3}),
        );
        assert_eq!(e.field, "payload.colour", "{e}");
        let e = err(
            "discord.create_role",
            json!({"guild_id": "1", "name": "x".repeat(101)}),
        );
        assert_eq!(e.field, "payload.name", "{e}");
        let e = err(
            "discord.delete_role",
            json!({"guild_id": 1, "role_id": "2"}),
        );
        assert_eq!(e.field, "payload.guild_id", "{e}");
        let e = err(
            "discord.delete_role",
            json!({"guild_id": "99999999999999999999", "role_id": "2"}),
        );
        assert_eq!(e.field, "payload.guild_id", "{e}");
        let e = err(
            "discord.update_permissions",
            json!({"channel_id": "1", "overwrite_id": "2", "type": 7}),
        );
        assert_eq!(e.field, "payload.type", "{e}");
        let e = err(
            "discord.create_channel",
            json!({"guild_id": "1", "name": "general", "reason": "a\nb"}),
        );
        assert_eq!(e.field, "payload.reason", "{e}");
    }

    #[test]
    fn operations_become_discord_calls() {
        let op = Operation::parse(
            "discord.assign_role",
            &json!({"guild_id": "10", "user_id": "20", "role_id": "30", "reason": "onboarding"}),
        )
        .unwrap()
        .unwrap();
        let call = op.call();
        assert_eq!(call.method, "PUT");
        assert_eq!(call.path, "/guilds/10/members/20/roles/30");
        assert_eq!(call.route, "PUT /guilds/10/members/:id/roles/:id");
        assert_eq!(call.reason.as_deref(), Some("onboarding"));

        let op = Operation::parse(
            "discord.create_channel",
            &json!({"guild_id": "10", "name": "general", "type": 2}),
        )
        .unwrap()
        .unwrap();
        let call = op.call();
        assert_eq!(call.body, Some(json!({"name": "general", "type": 2})));
    }
}
