//! The query string of `serve`'s session list (`/?status=unfinished&label=agent%3Ddemo`,
//! `/api/sessions?...`): the filters of `sessions`, and `q`, a text that
//! the id or a label (`KEY=VALUE`) must contain.

use agent_journal::{Error, Journal, SessionInfo};

use crate::cli::find::ListArgs;

/// Decodes one `application/x-www-form-urlencoded` component: `+` is a
/// space, `%XX` a byte; a `%` not followed by two hex digits stays as it is.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded `key=value` pairs of a query string, in their order.
pub(super) fn pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The value of `key` among `pairs` (the first), or "".
pub(super) fn value<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map_or("", |(_, v)| v.as_str())
}

/// The sessions of `journal` that the query's filters select, in its
/// order. Dates are UTC days (the server's pages print UTC).
///
/// # Errors
///
/// [`Error::InvalidInput`] for a key or value the filters refuse; the
/// errors of reading the sessions.
pub(super) fn select(
    journal: &Journal,
    pairs: &[(String, String)],
) -> Result<Vec<SessionInfo>, Error> {
    let list = ListArgs::from_pairs(pairs)?;
    let select = list.select(true)?;
    let q = value(pairs, "q").to_lowercase();
    let mut infos: Vec<SessionInfo> = journal
        .sessions_info()?
        .into_iter()
        .filter(|i| select.keeps(i) && (q.is_empty() || contains(i, &q)))
        .collect();
    select.order(&mut infos);
    Ok(infos)
}

/// Whether the id or a label (`KEY=VALUE`) of `i` contains `q` (lower case),
/// ignoring case.
fn contains(i: &SessionInfo, q: &str) -> bool {
    i.id.to_string().contains(q)
        || i.labels
            .iter()
            .any(|(k, v)| format!("{k}={v}").to_lowercase().contains(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_decoded_and_bad_escapes_kept() {
        assert_eq!(decode("agent%3Ddemo+x"), "agent=demo x");
        assert_eq!(decode("%2Ftmp%2"), "/tmp%2");
        assert_eq!(decode("%zz%"), "%zz%");
        assert_eq!(
            pairs("status=idle&&label=a%3Db&q"),
            [
                ("status".to_owned(), "idle".to_owned()),
                ("label".to_owned(), "a=b".to_owned()),
                ("q".to_owned(), String::new()),
            ]
        );
    }
}
