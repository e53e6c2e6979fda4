//! `nccl-smoke launch -n N <subcommand…>`: its flags (the launcher is `run::launch`).

use clap::Args;
use std::ffi::OsString;

#[derive(Args, Debug)]
pub struct LaunchArgs {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub np: u32,
    /// The nccl-smoke command each rank runs, e.g. `run --backend sim`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

pub fn launch(args: &LaunchArgs) -> u8 {
    crate::run::launch::launch(args.np, &args.command)
}
