//! The `postgres://` URL of a journal: the client's own connection string,
//! plus `schema=NAME`, the PostgreSQL schema that holds the journal's tables
//! (default `agent_journal`), so that several journals share one database.

use crate::error::{Error, Result};

/// The default schema of the journal's tables.
pub(crate) const DEFAULT_SCHEMA: &str = "agent_journal";

/// Splits off the `schema` parameter: `(connection string, schema)`.
///
/// # Errors
/// [`Error::InvalidInput`] for a schema name that is not a plain
/// identifier (letters, digits, `_`; not starting with a digit; at most 63
/// bytes), which would otherwise be spliced into SQL.
pub(crate) fn split(url: &str) -> Result<(String, String)> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut schema = DEFAULT_SCHEMA.to_owned();
    let mut kept = Vec::new();
    for param in query.split('&').filter(|p| !p.is_empty()) {
        match param.split_once('=') {
            Some(("schema", v)) => schema = v.to_owned(),
            _ => kept.push(param),
        }
    }
    let valid = !schema.is_empty()
        && schema.len() <= 63
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(Error::InvalidInput(format!(
            "schema {schema:?} in the PostgreSQL URL is not a plain identifier \
             (letters, digits and _, at most 63 bytes)"
        )));
    }
    let conn = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((conn, schema))
}

/// The URL without its password, for messages.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, tail) = match rest.split_once('@') {
        Some((a, t)) if !a.contains('/') => (a, t),
        _ => return url.to_owned(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{tail}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parameter_is_split_off_and_checked() {
        let (c, s) = split("postgres://u@h/db?schema=run_7&sslmode=disable").expect("ok");
        assert_eq!(
            (c.as_str(), s.as_str()),
            ("postgres://u@h/db?sslmode=disable", "run_7")
        );
        let (c, s) = split("postgresql://h/db").expect("ok");
        assert_eq!(
            (c.as_str(), s.as_str()),
            ("postgresql://h/db", DEFAULT_SCHEMA)
        );
        for bad in ["x;drop", "1abc", "", "a-b", "\"q\""] {
            assert!(
                split(&format!("postgres://h/db?schema={bad}")).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            redacted("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(redacted("postgres://h/db"), "postgres://h/db");
    }
}
