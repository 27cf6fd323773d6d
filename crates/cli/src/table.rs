//! Text tables for people: no borders, columns two spaces apart, chosen
//! columns right-aligned (numbers). Drawn by `comfy-table`; every table the
//! CLI prints goes through [`Table`], so they all look alike.

use comfy_table::{CellAlignment, ContentArrangement, presets};

/// A table being filled: a header, then rows.
pub(crate) struct Table {
    inner: comfy_table::Table,
    right: Vec<usize>,
}

impl Table {
    /// A table with these column titles (empty strings for untitled
    /// columns; a table whose titles are all empty prints no header line).
    pub(crate) fn new<S: Into<String>>(head: impl IntoIterator<Item = S>) -> Table {
        let mut inner = comfy_table::Table::new();
        inner
            .load_preset(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled);
        let head: Vec<String> = head.into_iter().map(Into::into).collect();
        if head.iter().any(|h| !h.is_empty()) {
            inner.set_header(head);
        }
        Table {
            inner,
            right: Vec::new(),
        }
    }

    /// Right-aligns these columns (0-based), for numbers.
    pub(crate) fn right(mut self, columns: impl IntoIterator<Item = usize>) -> Table {
        self.right.extend(columns);
        self
    }

    /// Appends a row.
    pub(crate) fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        self.inner
            .add_row(cells.into_iter().map(|c| c.to_string()).collect::<Vec<_>>());
        self
    }

    /// The table as lines, each ended by a newline, without trailing spaces.
    pub(crate) fn render(mut self) -> String {
        let columns = self.inner.column_count();
        for (i, column) in self.inner.column_iter_mut().enumerate() {
            // Two spaces between columns, none before the first or after the last.
            column.set_padding((0, if i + 1 == columns { 0 } else { 2 }));
            if self.right.contains(&i) {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        let mut out = String::new();
        for line in self.inner.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A table of left-aligned text columns in one call.
pub(crate) fn plain<const N: usize>(head: [&str; N], rows: &[[String; N]]) -> String {
    let mut t = Table::new(head);
    for row in rows {
        t.row(row);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_two_spaces_apart_and_numbers_right_aligned() {
        let mut t = Table::new(["NAME", "CALLS", "NOTE"]).right([1]);
        t.row(["openai", "7", "ok"]).row(["anthropic", "1234", ""]);
        assert_eq!(
            t.render(),
            "NAME       CALLS  NOTE\n\
             openai         7  ok\n\
             anthropic   1234\n"
        );
    }

    #[test]
    fn an_untitled_table_prints_rows_only() {
        let mut t = Table::new(["", ""]).right([1]);
        t.row(["answers", "12"]).row(["errors", "0"]);
        assert_eq!(t.render(), "answers  12\nerrors    0\n");
    }

    #[test]
    fn wide_characters_keep_columns_straight() {
        let mut t = Table::new(["A", "B"]);
        t.row(["é…", "x"]);
        assert_eq!(t.render(), "A   B\né…  x\n");
    }
}
