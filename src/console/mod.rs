//! Everything a person reads: from the subcommands that read files, each module takes what
//! `report` and `diagnose` computed and prints it, and returns the exit code; and a run's
//! worker's console (`rank`), which alone decides what each rank prints.

pub mod compare;
pub mod doctor;
pub mod explain;
pub mod rank;
pub mod verdict;

/// `s` as a message may show it: control characters escaped, at most 80 characters.
pub fn sanitize(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_debug).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// A message for the terminal: every control character but newline and tab escaped.
pub fn terminal_safe(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}
