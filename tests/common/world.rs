//! A world of ranks started by hand, each with its own variables, as torchrun starts them.

use super::*;

/// Starts one process of the built binary per entry of `ranks` (each with its own variables) at once, and returns
/// their outputs in the same order.
pub fn start_world(ranks: Vec<Vec<(String, String)>>, args: &[String]) -> Vec<Output> {
    let threads: Vec<_> = ranks
        .into_iter()
        .map(|vars| {
            let args = args.to_vec();
            std::thread::spawn(move || {
                let mut cmd = Command::new(bin());
                cmd.args(&args);
                for k in LAUNCHER_VARS {
                    cmd.env_remove(k);
                }
                cmd.envs(vars);
                bounded(cmd, 90)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

pub fn vars(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

pub fn torchrun(rank: u32, size: u32, port: u16) -> Vec<(String, String)> {
    vars(&[
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", size.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
    ])
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
