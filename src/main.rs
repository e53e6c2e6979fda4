use clap::Parser;
use nccl_smoke::cli::{Cli, dispatch};
use nccl_smoke::console::terminal_safe;
use nccl_smoke::stage::exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap quotes what it was given: escape control characters before they reach a
            // terminal.
            let text = terminal_safe(&e.render().to_string());
            use std::io::Write;
            if e.use_stderr() {
                let _ = write!(std::io::stderr(), "{text}");
                return ExitCode::from(exit::USAGE);
            }
            let _ = write!(std::io::stdout(), "{text}");
            return ExitCode::from(exit::PASS);
        }
    };
    ExitCode::from(dispatch(cli))
}
