//! Plain-text tables for people: each column as wide as its widest cell, text left-aligned and
//! figures right-aligned.

use std::io::{self, Write};

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text.
    Left,
    /// Figures.
    Right,
}

/// A table filled row by row, then written at once.
#[derive(Debug)]
pub(crate) struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headings.
    pub(crate) fn new(columns: &[(&'static str, Align)]) -> Table {
        Table { columns: columns.to_vec(), rows: Vec::new() }
    }

    /// Adds a row: one cell per column (missing cells are blank, extra ones dropped).
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Writes the headings and the rows, columns separated by two spaces, with no trailing blanks.
    pub(crate) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let width = |c: usize| {
            let cells = self.rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count());
            cells.fold(self.columns[c].0.chars().count(), usize::max)
        };
        let widths: Vec<usize> = (0..self.columns.len()).map(width).collect();
        let headings: Vec<String> = self.columns.iter().map(|(h, _)| (*h).to_owned()).collect();
        for cells in std::iter::once(&headings).chain(&self.rows) {
            let mut line = String::new();
            for (c, ((_, align), w)) in self.columns.iter().zip(&widths).enumerate() {
                let cell = cells.get(c).map_or("", String::as_str);
                if c > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
                match align {
                    Align::Left => [cell, &pad].iter().for_each(|s| line.push_str(s)),
                    Align::Right => [&pad, cell].iter().for_each(|s| line.push_str(s)),
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_their_widest_cell() {
        let mut t = Table::new(&[("function", Align::Left), ("ms", Align::Right), ("note", Align::Left)]);
        t.row(vec!["indexer".into(), "1,303.4".into(), String::new()]);
        t.row(vec!["aggregator-x".into(), "9.0".into(), "ok".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "function           ms  note\n\
             indexer       1,303.4\n\
             aggregator-x      9.0  ok\n"
        );
    }
}
