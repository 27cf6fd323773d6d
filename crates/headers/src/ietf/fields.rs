//! Structured-field lists and dictionaries (RFC 9651), read with `sfv`'s
//! visitors into members that borrow from the header value where they can.
//!
//! A field that does not parse as a whole is not read at all, as RFC 9651
//! requires: a structured field has no partial meaning.

use std::borrow::Cow;
use std::convert::Infallible;

use sfv::visitor::{
    DictionaryVisitor, EntryVisitor, Ignored, InnerListVisitor, ItemVisitor, ListVisitor,
    ParameterVisitor,
};
use sfv::{BareItemFromInput, KeyRef, Parser};

/// A bare item, as far as the rate-limit fields care.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value<'a> {
    /// An integer or a decimal, as written (`100`, `1.5`).
    Number(String),
    /// A string's contents or a token.
    Text(Cow<'a, str>),
    /// A byte sequence, a boolean, a date: nothing these fields use.
    Other,
}

impl Value<'_> {
    /// The number as written, for the crate's parsers of counts and times.
    pub(super) fn number(&self) -> Option<&str> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// A string's contents or a token, if not empty: a name.
    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Value::Text(t) if !t.is_empty() => Some(t),
            _ => None,
        }
    }
}

impl<'a> From<BareItemFromInput<'a>> for Value<'a> {
    fn from(item: BareItemFromInput<'a>) -> Self {
        match item {
            BareItemFromInput::Integer(i) => Value::Number(i.to_string()),
            BareItemFromInput::Decimal(d) => Value::Number(d.to_string()),
            BareItemFromInput::String(Cow::Borrowed(s)) => Value::Text(Cow::Borrowed(s.as_str())),
            BareItemFromInput::String(Cow::Owned(s)) => Value::Text(Cow::Owned(s.into())),
            BareItemFromInput::Token(t) => Value::Text(Cow::Borrowed(t.as_str())),
            _ => Value::Other,
        }
    }
}

/// A list member or dictionary entry that is an item (inner lists are
/// skipped): its key in a dictionary, its bare item, its parameters.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Member<'a> {
    pub(super) key: Option<&'a str>,
    pub(super) bare: Value<'a>,
    pub(super) params: Vec<(&'a str, Value<'a>)>,
}

/// The members of a structured-field list, or `None` if `value` is not one.
pub(super) fn list(value: &str) -> Option<Vec<Member<'_>>> {
    Parser::new(value)
        .parse_list_with_visitor(Members::default())
        .ok()
}

/// The entries of a structured-field dictionary, or `None` if `value` is
/// not one.
pub(super) fn dictionary(value: &str) -> Option<Vec<Member<'_>>> {
    Parser::new(value)
        .parse_dictionary_with_visitor(Members::default())
        .ok()
}

#[derive(Debug, Default)]
struct Members<'a>(Vec<Member<'a>>);

impl<'de> ListVisitor<'de> for Members<'de> {
    type Out = Vec<Member<'de>>;
    type Error = Infallible;

    fn entry(&mut self) -> Result<impl EntryVisitor<'de>, Self::Error> {
        Ok(Entry {
            out: &mut self.0,
            key: None,
        })
    }

    fn finish(self) -> Result<Self::Out, Self::Error> {
        Ok(self.0)
    }
}

impl<'de> DictionaryVisitor<'de> for Members<'de> {
    type Out = Vec<Member<'de>>;
    type Error = Infallible;

    fn entry(&mut self, key: &'de KeyRef) -> Result<impl EntryVisitor<'de>, Self::Error> {
        // A key that repeats: the last one counts (RFC 9651).
        let key = key.as_str();
        self.0.retain(|m| m.key != Some(key));
        Ok(Entry {
            out: &mut self.0,
            key: Some(key),
        })
    }

    fn finish(self) -> Result<Self::Out, Self::Error> {
        Ok(self.0)
    }
}

struct Entry<'v, 'de> {
    out: &'v mut Vec<Member<'de>>,
    key: Option<&'de str>,
}

impl<'de> EntryVisitor<'de> for Entry<'_, 'de> {
    type Error = Infallible;

    fn item(self) -> Result<impl ItemVisitor<'de>, Self::Error> {
        Ok(self)
    }

    fn inner_list(self) -> Result<impl InnerListVisitor<'de>, Self::Error> {
        Ok(Ignored)
    }
}

impl<'de> ItemVisitor<'de> for Entry<'_, 'de> {
    type Out = ();
    type Error = Infallible;

    fn bare_item(
        self,
        bare_item: BareItemFromInput<'de>,
    ) -> Result<impl ParameterVisitor<'de, Out = ()>, Self::Error> {
        self.out.push(Member {
            key: self.key,
            bare: bare_item.into(),
            params: Vec::new(),
        });
        let member = self.out.last_mut().expect("just pushed");
        Ok(Params(&mut member.params))
    }
}

struct Params<'v, 'de>(&'v mut Vec<(&'de str, Value<'de>)>);

impl<'de> ParameterVisitor<'de> for Params<'_, 'de> {
    type Out = ();
    type Error = Infallible;

    fn parameter(
        &mut self,
        key: &'de KeyRef,
        value: BareItemFromInput<'de>,
    ) -> Result<(), Self::Error> {
        // A key that repeats: the last one counts (RFC 9651).
        let key = key.as_str();
        self.0.retain(|(k, _)| *k != key);
        self.0.push((key, value.into()));
        Ok(())
    }

    fn finish(self) -> Result<(), Self::Error> {
        Ok(())
    }
}
