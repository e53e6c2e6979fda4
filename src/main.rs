use clap::Parser;
use nccl_smoke::cli::{Cli, dispatch};
use nccl_smoke::stage::exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::PASS
            });
        }
    };
    ExitCode::from(dispatch(cli))
}
