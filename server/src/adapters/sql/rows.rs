//! Rows of one batch statement, column by column, and their three encodings: one typed
//! array per column (PostgreSQL), one JSON document (MySQL `JSON_TABLE`), a `VALUES` list
//! (SQLite). Only strings are ever bound or quoted as data; numbers and dates are written
//! by `Display` and cannot carry SQL.

use std::fmt::Write;

use chrono::NaiveDate;
use sea_orm::Value;

/// Rows of one statement, column by column.
pub struct Rows {
    /// Number of rows.
    pub len: usize,
    /// The columns, each `len` long.
    pub columns: Vec<Column>,
}

/// One typed column of [`Rows`].
pub enum Column {
    /// BIGINT.
    Int(Vec<i64>),
    /// SMALLINT.
    SmallInt(Vec<i16>),
    /// DATE.
    Date(Vec<NaiveDate>),
    /// Short ASCII text (event ids).
    Text(Vec<String>),
}

impl Rows {
    /// `[[row 0 values…], [row 1 values…], …]`.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(self.len * self.columns.len() * 12 + 2);
        out.push('[');
        for r in 0..self.len {
            out.push_str(if r == 0 { "[" } else { ",[" });
            for (i, c) in self.columns.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                c.json(r, &mut out);
            }
            out.push(']');
        }
        out.push(']');
        out
    }

    /// `["a", "b", …]`.
    pub fn json_strings(values: &[String]) -> String {
        let mut out = String::with_capacity(values.len() * 32 + 2);
        out.push('[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_string(v, &mut out);
        }
        out.push(']');
        out
    }

    /// `VALUES (…),(…)` with strings bound into `values` and everything else literal.
    pub fn to_values(&self, values: &mut Vec<Value>) -> String {
        let mut out = String::with_capacity(self.len * self.columns.len() * 12 + 8);
        out.push_str("VALUES ");
        for r in 0..self.len {
            out.push_str(if r == 0 { "(" } else { ",(" });
            for (i, c) in self.columns.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                c.literal_or_bind(r, &mut out, values);
            }
            out.push(')');
        }
        out
    }
}

/// A JSON string. Event ids are printable ASCII, but serde_json escapes quotes, backslashes
/// and every control character anyway, so that no value can end the document early.
fn json_string(v: &str, out: &mut String) {
    out.push_str(&serde_json::Value::from(v).to_string());
}

impl Column {
    /// The column as one PostgreSQL array parameter and its element type.
    pub fn array(&self) -> (Value, &'static str) {
        match self {
            Self::Int(v) => (Value::from(v.clone()), "bigint"),
            Self::SmallInt(v) => (Value::from(v.clone()), "smallint"),
            Self::Date(v) => (Value::from(v.clone()), "date"),
            Self::Text(v) => (Value::from(v.clone()), "text"),
        }
    }

    /// The `JSON_TABLE` column type.
    pub fn mysql_type(&self) -> &'static str {
        match self {
            Self::Int(_) => "BIGINT",
            Self::SmallInt(_) => "SMALLINT",
            Self::Date(_) => "DATE",
            Self::Text(_) => "VARCHAR(128) CHARACTER SET ascii",
        }
    }

    /// Writes row `r` as a JSON value.
    fn json(&self, r: usize, out: &mut String) {
        // Writing into a String cannot fail.
        let _ = match self {
            Self::Int(v) => write!(out, "{}", v[r]),
            Self::SmallInt(v) => write!(out, "{}", v[r]),
            Self::Date(v) => write!(out, "\"{}\"", v[r].format("%Y-%m-%d")),
            Self::Text(v) => {
                json_string(&v[r], out);
                Ok(())
            }
        };
    }

    /// Writes row `r`: numbers and dates as literals, strings as bound parameters.
    fn literal_or_bind(&self, r: usize, out: &mut String, values: &mut Vec<Value>) {
        // Writing into a String cannot fail.
        let _ = match self {
            Self::Int(v) => write!(out, "{}", v[r]),
            Self::SmallInt(v) => write!(out, "{}", v[r]),
            Self::Date(v) => write!(out, "'{}'", v[r].format("%Y-%m-%d")),
            Self::Text(v) => {
                values.push(Value::from(v[r].clone()));
                out.push('?');
                Ok(())
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_quotes_backslashes_and_control_characters() {
        assert_eq!(Rows::json_strings(&["a\"b\\c".into(), "\n\u{1}".into()]), r#"["a\"b\\c","\n\u0001"]"#);
        let rows = Rows { len: 1, columns: vec![Column::SmallInt(vec![4]), Column::Text(vec!["]".into()])] };
        assert_eq!(rows.to_json(), r#"[[4,"]"]]"#);
        assert_eq!(Rows { len: 0, columns: vec![Column::Int(vec![])] }.to_json(), "[]");
    }

    #[test]
    fn values_lists_bind_every_string() {
        let rows =
            Rows { len: 2, columns: vec![Column::Text(vec!["'); --".into(), "x".into()]), Column::Int(vec![7, 8])] };
        let mut values = Vec::new();
        assert_eq!(rows.to_values(&mut values), "VALUES (?,7),(?,8)");
        assert_eq!(values, vec![Value::from("'); --".to_string()), Value::from("x".to_string())]);
    }
}
