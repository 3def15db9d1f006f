//! `sidestream grid`: one page of a scope's items sorted by an indexed field, as a readable
//! table, then the cursor of the next page.

use std::io::Write;

use grid_view::{GridSchema, Page, Phase};
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
    layout: &GridSchema,
    field: &str,
    attributes: &[String],
    mut out: impl Write,
) -> std::io::Result<()> {
    let mut columns: Vec<&str> = vec![&layout.order, &layout.key];
    for attribute in layout.projected.iter().chain(attributes) {
        if !columns.contains(&attribute.as_str()) {
            columns.push(attribute);
        }
    }
    let mut lines = vec![
        std::iter::once(field.to_owned())
            .chain(columns.iter().map(|c| (*c).to_owned()))
            .collect::<Vec<_>>(),
    ];
    for row in &page.rows {
        let value = match page.phase {
            Phase::Index => plain(row.value.as_ref()),
            Phase::Nulls => "-".to_owned(),
        };
        lines.push(
            std::iter::once(value)
                .chain(columns.iter().map(|c| plain(row.item.get(*c))))
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..=columns.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
                .min(40)
        })
        .collect();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    let phase = match page.phase {
        Phase::Index => format!("with {field}, in its order"),
        Phase::Nulls => format!("without {field}, in {} order", layout.order),
    };
    writeln!(
        out,
        "({} items {phase}; {} Query, {} BatchGetItem)",
        page.rows.len(),
        page.requests.queries,
        page.requests.batch_gets
    )?;
    writeln!(out, "next: {}", page.next.as_deref().unwrap_or("none"))
}
