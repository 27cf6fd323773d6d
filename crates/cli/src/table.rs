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

    /// Appends a row. Control characters in a cell are written escaped
    /// ([`printable`]): names in tables come from callers.
    pub(crate) fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        self.inner.add_row(
            cells
                .into_iter()
                .map(|c| printable(&c.to_string()))
                .collect::<Vec<_>>(),
        );
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

/// `s` with every control character (C0, DEL, C1: what a terminal reads as
/// a command, e.g. the escape that starts `\x1b[2J`) written as `\u{..}`,
/// so that a name a caller chose (a tenant, a user, a model, a feature)
/// prints as text and never drives the operator's terminal.
pub(crate) fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
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
    fn control_characters_print_escaped() {
        assert_eq!(printable("acme"), "acme");
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("x\ny\u{9b}z\u{7f}"), "x\\u{a}y\\u{9b}z\\u{7f}");
        let mut t = Table::new(["NAME"]);
        t.row(["evil\u{1b}]0;pwned\u{7}"]);
        let out = t.render();
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        assert!(out.contains("evil\\u{1b}]0;pwned\\u{7}"), "{out:?}");
    }

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
