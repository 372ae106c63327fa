//! How a message quotes the text it is about: never more than [`QUOTE_CHARS`] characters of
//! it, so that a long or hostile line cannot flood an error message (the readers of records
//! and files, the page's import).

/// The most characters of a line (or of a value) a message quotes.
pub const QUOTE_CHARS: usize = 80;

/// `text`, cut to `max` characters (the cut marked with "...").
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some(_) => {
            let keep: String = text.chars().take(max.saturating_sub(3)).collect();
            keep + "..."
        }
    }
}

/// At most [`QUOTE_CHARS`] characters of `text`, to quote in a message.
pub fn quote(text: &str) -> String {
    cut(text, QUOTE_CHARS)
}
