//! Typed key components as JSON: DynamoDB JSON (`{"S":…}`, `{"N":…}`, `{"B":…}`, `{"BOOL":…}`,
//! `{"NULL":true}`) plus `{"DATE":"YYYY-MM-DD"}` and `{"DATETIME":"<RFC 3339>"}` for the two
//! types DynamoDB JSON lacks.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use key_codec::{Date, DateTime, Number, Value};
use serde_json::{Map, Value as Json, json};

/// Reads one typed component. The error says what was expected.
pub(crate) fn value_from_json(json: &Json) -> Result<Value, String> {
    let Some((kind, inner)) = json.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next()) else {
        return Err(format!("expected an object with one type key like {{\"S\":\"text\"}}, got {json}"));
    };
    let text = || inner.as_str().ok_or_else(|| format!("{kind} takes a JSON string, got {inner}"));
    match kind.as_str() {
        "S" => Ok(Value::String(text()?.to_owned())),
        "N" => Number::parse(text()?).map(Value::Number).map_err(|e| e.to_string()),
        "B" => BASE64.decode(text()?).map(Value::Binary).map_err(|e| format!("B is not valid base64: {e}")),
        "BOOL" => {
            inner.as_bool().map(Value::Bool).ok_or_else(|| format!("BOOL takes true or false, got {inner}"))
        }
        "NULL" if inner == &Json::Bool(true) => Ok(Value::Null),
        "NULL" => Err(format!("NULL takes true, got {inner}")),
        "DATE" => Date::parse(text()?).map(Value::Date).map_err(|e| e.to_string()),
        "DATETIME" => DateTime::parse(text()?).map(Value::DateTime).map_err(|e| e.to_string()),
        other => Err(format!("unknown type {other:?}: use S, N, B, BOOL, NULL, DATE or DATETIME")),
    }
}

/// Writes one typed component, the inverse of [`value_from_json`].
pub(crate) fn value_to_json(value: &Value) -> Json {
    let (kind, inner) = match value {
        Value::Null => ("NULL", json!(true)),
        Value::Bool(b) => ("BOOL", json!(b)),
        Value::Number(n) => ("N", json!(n.to_string())),
        Value::String(s) => ("S", json!(s)),
        Value::Binary(b) => ("B", json!(BASE64.encode(b))),
        Value::Date(d) => ("DATE", json!(d.to_string())),
        Value::DateTime(t) => ("DATETIME", json!(t.to_string())),
    };
    let mut object = Map::with_capacity(1);
    object.insert(kind.to_owned(), inner);
    Json::Object(object)
}
