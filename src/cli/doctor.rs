//! `nccl-smoke doctor`

use super::LibArgs;
use crate::console;
use crate::run::libs;
use crate::stage::exit;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub libs: LibArgs,
    /// Read every file-system fact under DIR instead of / (fixture nodes in tests).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub sysroot: PathBuf,
    /// Ranks that will run on this node (sizes the /dev/shm check).
    #[arg(long, default_value = "8")]
    pub local_ranks: u32,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn doctor(args: &DoctorArgs) -> u8 {
    let link_dir = std::env::temp_dir().join(format!("nccl-smoke-doctor.{}", std::process::id()));
    let choice = args.libs.choice();
    let libs = match libs::resolve(&choice, || {
        let which = choice.stand_ins().unwrap_or(libs::StandIns::Sim);
        libs::prepare_links(which, choice.sim_dir.as_deref(), &link_dir)
    }) {
        Ok(l) => (l.nccl, l.cuda),
        Err(e) => {
            eprintln!("nccl-smoke doctor: {e}");
            return exit::USAGE;
        }
    };
    let code = console::doctor::run(&console::doctor::Inputs {
        sysroot: &args.sysroot,
        libs,
        local_ranks: args.local_ranks,
        json: args.json,
    });
    let _ = std::fs::remove_dir_all(&link_dir);
    code
}
