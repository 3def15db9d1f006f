//! docs/formats.md's vectors against the code that writes them: each format is specified once,
//! in the doc, and the code is held to it here, so that the doc cannot drift from the bytes.

use anyhow::{Context, Result, bail, ensure};
use key_codec::{BinaryKey, Date, Dir, Number, TextKey, Value};

fn formats_md() -> Result<String> {
    Ok(std::fs::read_to_string(format!("{}/../docs/formats.md", env!("CARGO_MANIFEST_DIR")))?)
}

/// One component of a vector's tuple as the doc writes it: `42.5`, `-42 desc`, `"a b"`,
/// `"\0"`, `2024-05-01`, `true`, `null`.
fn component(text: &str) -> Result<(Value, Dir)> {
    let (text, dir) = match text.strip_suffix(" desc") {
        Some(rest) => (rest, Dir::Desc),
        None => (text, Dir::Asc),
    };
    let value = if let Some(quoted) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Value::String(quoted.replace("\\0", "\0"))
    } else if text == "true" || text == "false" {
        Value::Bool(text == "true")
    } else if text == "null" {
        Value::Null
    } else if text.len() == 10 && text.as_bytes()[4] == b'-' {
        Value::Date(Date::parse(text)?)
    } else {
        Value::Number(Number::parse(text)?)
    };
    Ok((value, dir))
}

/// A tuple as the doc writes it: `("In progress", -1.5 desc, "SRC#7")`.
fn tuple(text: &str) -> Result<Vec<(Value, Dir)>> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .with_context(|| format!("{text} is not a tuple"))?;
    let mut parts = Vec::new();
    let (mut current, mut quoted) = (String::new(), false);
    for c in inner.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            ',' if !quoted => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts.iter().map(|p| component(p.trim())).collect()
}

/// "Key vectors": each tuple's K1 and B1 encodings, as the doc gives them, and back.
#[test]
fn the_key_vectors_are_what_key_codec_writes_and_reads() -> Result<()> {
    let doc = formats_md()?;
    let table = doc.split("### Key vectors").nth(1).context("docs/formats.md has no Key vectors section")?;
    let mut checked = 0;
    for line in table.lines().skip_while(|l| !l.starts_with("| (")) {
        if !line.starts_with("| (") {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").map(|c| c.trim_matches(['|', ' '])).collect();
        let [tuple_text, text, binary] = cells[..] else {
            bail!("a vector row that is not three cells: {line}");
        };
        let components = tuple(tuple_text)?;
        let text = text.trim_matches('`');
        let encoded = TextKey::from_tuple(components.iter().map(|(v, d)| (v, *d)));
        ensure!(encoded.as_str() == text, "{tuple_text}: K1 {:?}, the doc says {text:?}", encoded.as_str());
        ensure!(key_codec::text::decode(text)? == components, "{tuple_text}: {text} decodes otherwise");
        let binary = binary.trim_matches('`');
        if !binary.is_empty() {
            let bytes: Vec<u8> =
                binary.split_whitespace().map(|b| u8::from_str_radix(b, 16)).collect::<Result<_, _>>()?;
            let encoded = BinaryKey::from_tuple(components.iter().map(|(v, d)| (v, *d)));
            ensure!(
                encoded.as_bytes() == bytes,
                "{tuple_text}: B1 {:02x?}, the doc says {binary}",
                encoded.as_bytes()
            );
            ensure!(
                key_codec::binary::decode(&bytes)? == components,
                "{tuple_text}: {binary} decodes otherwise"
            );
        }
        checked += 1;
    }
    ensure!(checked >= 16, "only {checked} key vectors read from docs/formats.md");
    Ok(())
}
