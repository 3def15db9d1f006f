//! DynamoDB's item size limit, measured before a request is sent.
//!
//! DynamoDB rejects an item over 400 KB with a `ValidationException` that, inside a
//! `BatchWriteItem`, fails the whole request. A plan measures its items first, so that the record
//! that would produce one is named, with the size and the limit, before anything is sent.

use serde_dynamo::{AttributeValue, Item};

use crate::wire::Attr;

/// The largest item DynamoDB stores: 400 KB, names and values together.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// An item's size as DynamoDB counts it: each attribute's name in UTF-8 bytes plus its value.
pub fn item_size(item: &Item) -> usize {
    size(item.iter().map(|(name, value)| (name.as_str(), value)))
}

/// The size of an item given as its (name, value) pairs, as [`item_size`] counts it.
pub fn size<'i>(attributes: impl IntoIterator<Item = (&'i str, &'i AttributeValue)>) -> usize {
    attributes.into_iter().map(|(name, value)| name.len() + value_size(value)).sum()
}

/// A value's size: strings and binaries by their bytes, numbers by about one byte per two
/// significant digits plus one, booleans and nulls one byte, lists and maps three bytes plus one
/// per element plus their elements (and map keys), sets their elements.
pub fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::M(map) => 3 + map.iter().map(|(k, v)| 1 + k.len() + value_size(v)).sum::<usize>(),
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(set) => set.iter().map(Vec::len).sum(),
    }
}

/// The size of a value read in place ([`crate::wire`]), by the same rules as [`value_size`]: what
/// the value will count for once it is sent.
pub fn attr_size(value: &Attr<'_>) -> usize {
    match value {
        Attr::S(s) => s.len(),
        Attr::N(n) => number_size(n),
        Attr::B(b) => b.len(),
        Attr::Bool(_) | Attr::Null => 1,
        Attr::L(list) => 3 + list.iter().map(|v| 1 + attr_size(v)).sum::<usize>(),
        Attr::M(map) => 3 + map.iter().map(|(k, v)| 1 + k.len() + attr_size(v)).sum::<usize>(),
        Attr::Ss(set) => set.iter().map(|s| s.len()).sum(),
        Attr::Ns(set) => set.iter().map(|n| number_size(n)).sum(),
        Attr::Bs(set) => set.iter().map(Vec::len).sum(),
    }
}

/// The size of a number: its significant digits, two to a byte, and one byte more.
pub fn number_size(n: &str) -> usize {
    // Counted in place: a plan measures every put, and most of them hold numbers.
    let mantissa = n.split(['e', 'E']).next().unwrap_or("");
    let digits = || mantissa.bytes().filter(u8::is_ascii_digit);
    let total = digits().count();
    let leading = digits().take_while(|&d| d == b'0').count();
    let trailing = digits().rev().take_while(|&d| d == b'0').count();
    let significant = total.saturating_sub(leading + trailing).max(1);
    significant.div_ceil(2) + 1
}

#[cfg(test)]
mod tests;
