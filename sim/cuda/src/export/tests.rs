use super::*;
use md2::Digest;

fn input(version: u32) -> IntegrityInput {
    IntegrityInput {
        driver_version: 12080,
        version,
        pid: 1234,
        thread: 0xdead_beef,
        cudart_table: 0x7f00_0000_1000,
        integrity_table: 0x7f00_0000_2000,
        check_fn: 0x7f00_0000_3000,
        time: 1_764_000_000,
        devices: vec![([7; 16], 0, 0x18, 0), ([9; 16], 0, 0x2a, 0)],
    }
}

#[test]
fn fixed_answers_for_endings_0_and_1() {
    assert_eq!(
        integrity_answer(&input(12080)),
        [0x3341181C03CB675C, 0x8ED383AA1F4CD1E8]
    );
    assert_eq!(
        integrity_answer(&input(12091)),
        [0x1841181C03CB675C, 0x8ED383AA1F4CD1E8]
    );
}

/// The `hmac` crate over `md2` is exactly MD2((k ^ 0x5c) ‖ MD2((k ^ 0x36) ‖ m)) with the
/// 16-byte key (= MD2's block): the shape FACTS.md gives.
#[test]
fn hmac_md2_is_the_described_shape() {
    let inp = input(12092);
    let msg = inp.message();
    assert_eq!(msg.len(), 48 + 2 * 28);
    let inner_key: Vec<u8> = INTEGRITY_KEY.iter().map(|k| k ^ 0x36).collect();
    let outer_key: Vec<u8> = INTEGRITY_KEY.iter().map(|k| k ^ 0x5c).collect();
    let inner = Md2::new()
        .chain_update(&inner_key)
        .chain_update(&msg)
        .finalize();
    let outer = Md2::new()
        .chain_update(&outer_key)
        .chain_update(inner)
        .finalize();
    let got = integrity_answer(&inp);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&got[0].to_le_bytes());
    bytes[8..].copy_from_slice(&got[1].to_le_bytes());
    assert_eq!(&bytes[..], &outer[..]);
}

#[test]
fn md2_matches_rfc_1319() {
    // RFC 1319, appendix A.5 test suite.
    let h = Md2::digest(b"abc");
    assert_eq!(
        h.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "da853b0d3f88d99b30283a69e6ded6bb"
    );
}

#[test]
fn known_tables_and_unknown_uuid() {
    for uuid in [
        UUID_CUDART_INTERFACE,
        UUID_TOOLS_TLS,
        UUID_TOOLS_RUNTIME_CALLBACK_HOOKS,
        UUID_CONTEXT_LOCAL_STORAGE_V0301,
        UUID_CONTEXT_CHECKS,
        UUID_INTEGRITY_CHECK,
    ] {
        assert!(table_for(&uuid).is_some());
        assert!(table_name(&uuid).is_some());
    }
    let unknown = [
        0xF8, 0xCF, 0xF9, 0x51, 0x21, 0x46, 0x8B, 0x4E, 0xB9, 0xE2, 0xFB, 0x46, 0x9E, 0x7C, 0x0D,
        0xD9,
    ];
    assert!(table_for(&unknown).is_none());
    assert_eq!(
        format_table_uuid(&unknown),
        "{F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9}"
    );
    let id = CUuuid {
        bytes: unknown.map(|b| b as std::ffi::c_char),
    };
    let mut p: *const c_void = NULL;
    // SAFETY: valid pointers.
    assert_eq!(
        unsafe { cuGetExportTable(&mut p, &id) },
        CUDA_ERROR_INVALID_VALUE
    );
    // Slot 0 of a sized table is its size in bytes.
    assert_eq!(INTEGRITY_CHECK.0[0] as usize, 3 * 8);
    assert_eq!(CUDART_INTERFACE.0[0] as usize, 13 * 8);
}

#[test]
fn tables_asked_for_and_lacked_are_kept_but_the_tolerated_one() {
    let ask = |bytes: [u8; 16]| {
        let id = CUuuid {
            bytes: bytes.map(|b| b as std::ffi::c_char),
        };
        let mut p: *const c_void = NULL;
        // SAFETY: valid pointers.
        unsafe { cuGetExportTable(&mut p, &id) }
    };
    assert_eq!(ask(UUID_TOLERATED_UNKNOWN), CUDA_ERROR_INVALID_VALUE);
    let tolerated = format_table_uuid(&UUID_TOLERATED_UNKNOWN);
    assert!(!lacking().unwrap_or_default().contains(&tolerated));
    let newer = [0x42; 16];
    assert_eq!(ask(newer), CUDA_ERROR_INVALID_VALUE);
    assert_eq!(ask(newer), CUDA_ERROR_INVALID_VALUE);
    let l = lacking().unwrap();
    assert_eq!(l.matches(&format_table_uuid(&newer)).count(), 1, "{l}");
    assert!(!l.contains(&tolerated), "{l}");
    assert_eq!(
        crate::config::parse_hidden_tables(Some(" CONTEXT_CHECKS,,TOOLS_TLS ")),
        vec!["CONTEXT_CHECKS".to_string(), "TOOLS_TLS".to_string()]
    );
    assert!(crate::config::parse_hidden_tables(None).is_empty());
}
