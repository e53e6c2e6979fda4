//! The subsystem an INFO line of NCCL shows a process in, by the words NCCL's INFO calls begin
//! with (they carry no source file): what a process did last before it crashed.
//!
//! Each row follows INFO format strings of NVIDIA/nccl (checked with `git grep` on v2.23.4-1
//! and, for RAS, v2.26.2-1): `RAS …` (src/ras/client_support.cc, rasnet.cc), `NET/IB …`
//! (src/transport/net_ib.cc), `NET/Socket …` (src/transport/net_socket.cc), `NET/Plugin: …`
//! (src/net.cc), `Bootstrap : Using …` (src/bootstrap.cc), `NVLS …` (src/transport/nvls.cc),
//! `Channel %02d/%d : … via NET/…` (src/transport/net.cc; `via P2P/…` and `via SHM/…` from
//! p2p.cc and shm.cc), `Connected all rings` (src/transport/generic.cc) and `… - Init COMPLETE`
//! (src/init.cc). Lines of other topics (a tuner, the proxy's, CUDA versions) place nothing.

use super::finding::Category;
use crate::stage::Stage;

/// Words in an INFO line → its subsystem and stage, first match wins.
const TOPICS: &[(&str, Category, Stage)] = &[
    ("Init COMPLETE", Category::Run, Stage::Run),
    ("Connected all ", Category::Init, Stage::Init),
    (" via NET/IB", Category::NetIb, Stage::ConnectNet),
    (" via NET/Socket", Category::NetSocket, Stage::ConnectNet),
    (" via P2P", Category::BufferImport, Stage::ConnectImport),
    (" via SHM", Category::Shm, Stage::ConnectShm),
    ("NCCL INFO RAS ", Category::Ras, Stage::Init),
    ("NCCL INFO NET/IB", Category::NetIb, Stage::ConnectNet),
    ("NCCL INFO NET/OFI", Category::NetIb, Stage::ConnectNet),
    (
        "NCCL INFO NET/Socket",
        Category::NetSocket,
        Stage::ConnectNet,
    ),
    (
        "NCCL INFO NET/Plugin",
        Category::VersionMismatch,
        Stage::NcclLoad,
    ),
    ("NCCL INFO Bootstrap", Category::Bootstrap, Stage::Init),
    ("NCCL INFO NVLS", Category::Nvls, Stage::Init),
];

/// The subsystem of an INFO line by its words.
pub(super) fn info_topic(line: &str) -> Option<(Category, Stage)> {
    TOPICS
        .iter()
        .find(|(words, ..)| line.contains(words))
        .map(|&(_, c, s)| (c, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_lines_place_their_subsystem() {
        let cases = [
            (
                "node1:1:2 [0] NCCL INFO RAS client listening socket at ::1<28028>",
                Some(Category::Ras),
            ),
            (
                "node2:1:2 [7] NCCL INFO NET/IB: IbDev 4 Port 1 qpn 103534 set_ece={supported=1}",
                Some(Category::NetIb),
            ),
            (
                "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
                Some(Category::BufferImport),
            ),
            (
                "h:1:2 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
                Some(Category::Run),
            ),
            ("h:1:2 [0] NCCL INFO cudaDriverVersion 12080", None),
        ];
        for (line, want) in cases {
            assert_eq!(info_topic(line).map(|p| p.0), want, "{line}");
        }
    }
}
