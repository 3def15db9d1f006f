//! `sidestream grid`: one page of a scope's items sorted by an indexed field, as a readable
//! table, then the cursor of the next page.

use std::io::Write;

use formats::cursor::Phase;
use operations::grid::{GridSchema, Page, Query};
use serde_json::Value;

/// A DynamoDB JSON value as plain text: strings and numbers as they are, sets and maps as JSON.
pub(crate) fn plain(value: Option<&Value>) -> String {
    let Some(Value::Object(typed)) = value else {
        return String::new();
    };
    match typed.iter().next().map(|(kind, inner)| (kind.as_str(), inner)) {
        Some(("S" | "N" | "B", Value::String(s))) => s.clone(),
        Some(("NULL", _)) => "null".to_owned(),
        Some((_, Value::Bool(b))) => b.to_string(),
        Some((_, other)) => other.to_string(),
        None => String::new(),
    }
}

/// Prints `page`: a header, one line per item (the sorted value, the key, the order attribute,
/// the index's attributes and any asked for), then `next: <cursor>` or `next: none`.
pub(crate) fn render(
    page: &Page,
    schema: &GridSchema,
    query: &Query,
    mut out: impl Write,
) -> std::io::Result<()> {
    let columns: Vec<&str> = schema
        .base_key()
        .iter()
        .map(String::as_str)
        .chain(operations::grid::output::columns(schema, query))
        .collect();
    let mut lines = vec![
        std::iter::once(query.field.clone())
            .chain(columns.iter().map(|c| (*c).to_owned()))
            .collect::<Vec<_>>(),
    ];
    let mut nulls = 0;
    for row in &page.rows {
        let value = match row.phase {
            Phase::Index => plain(row.value.as_ref()),
            Phase::Nulls => {
                nulls += 1;
                "-".to_owned()
            }
        };
        lines.push(std::iter::once(value).chain(columns.iter().map(|c| plain(row.item.get(*c)))).collect());
    }
    let widths: Vec<usize> = (0..=columns.len())
        .map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or(0).min(40))
        .collect();
    for line in &lines {
        let cells: Vec<String> =
            line.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    writeln!(
        out,
        "({} items sorted by {}, {nulls} without an indexed value, by {}; {} Query, {} BatchGetItem)",
        page.rows.len() - nulls,
        query.field,
        schema.order(),
        page.requests.queries,
        page.requests.batch_gets
    )?;
    writeln!(out, "next: {}", page.next.as_deref().unwrap_or("none"))?;
    out.flush()
}

/// Prints `page` as JSON lines (`operations::grid::output`).
pub(crate) fn json_lines(
    page: &Page,
    schema: &GridSchema,
    query: &Query,
    mut out: impl Write,
) -> std::io::Result<()> {
    for line in operations::grid::output::json_lines(page, schema, query) {
        writeln!(out, "{line}")?;
    }
    out.flush()
}
