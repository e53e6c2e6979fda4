//! What goes wrong in libnccl or in loading it: `ncclResult_t` by name, and the error value.

/// `ncclResult_t`, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ResultCode {
    Success,
    UnhandledCudaError,
    SystemError,
    InternalError,
    InvalidArgument,
    InvalidUsage,
    RemoteError,
    InProgress,
    /// A value this build of nccl-smoke does not know.
    Unexpected(u32),
}

impl ResultCode {
    pub fn from_raw(raw: u32) -> ResultCode {
        match raw {
            0 => ResultCode::Success,
            1 => ResultCode::UnhandledCudaError,
            2 => ResultCode::SystemError,
            3 => ResultCode::InternalError,
            4 => ResultCode::InvalidArgument,
            5 => ResultCode::InvalidUsage,
            6 => ResultCode::RemoteError,
            7 => ResultCode::InProgress,
            other => ResultCode::Unexpected(other),
        }
    }

    pub fn raw(self) -> u32 {
        match self {
            ResultCode::Success => 0,
            ResultCode::UnhandledCudaError => 1,
            ResultCode::SystemError => 2,
            ResultCode::InternalError => 3,
            ResultCode::InvalidArgument => 4,
            ResultCode::InvalidUsage => 5,
            ResultCode::RemoteError => 6,
            ResultCode::InProgress => 7,
            ResultCode::Unexpected(raw) => raw,
        }
    }

    /// The name in nccl.h.
    pub fn name(self) -> String {
        match self {
            ResultCode::Success => "ncclSuccess".into(),
            ResultCode::UnhandledCudaError => "ncclUnhandledCudaError".into(),
            ResultCode::SystemError => "ncclSystemError".into(),
            ResultCode::InternalError => "ncclInternalError".into(),
            ResultCode::InvalidArgument => "ncclInvalidArgument".into(),
            ResultCode::InvalidUsage => "ncclInvalidUsage".into(),
            ResultCode::RemoteError => "ncclRemoteError".into(),
            ResultCode::InProgress => "ncclInProgress".into(),
            ResultCode::Unexpected(raw) => format!("ncclResult_t({raw})"),
        }
    }
}

/// A failure of libnccl or of loading it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NcclError {
    #[error("cannot load NCCL from {path}: {detail}")]
    NotFound { path: String, detail: String },
    #[error(
        "{path} (NCCL {version}) has no symbol {symbol}; nccl-smoke needs it (NCCL >= {since})"
    )]
    MissingSymbol {
        path: String,
        version: String,
        symbol: &'static str,
        since: &'static str,
    },
    #[error("{call} returned {} ({}): {text}{}", .code.name(), .code.raw(),
        .last_error.as_deref().map(|l| format!(" — last error: {l}")).unwrap_or_default())]
    Call {
        call: &'static str,
        code: ResultCode,
        /// `ncclGetErrorString`.
        text: String,
        /// `ncclGetLastError`, when the library has it and said something.
        last_error: Option<String>,
    },
}

impl NcclError {
    pub fn code(&self) -> Option<ResultCode> {
        match self {
            NcclError::Call { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn last_error(&self) -> Option<&str> {
        match self {
            NcclError::Call { last_error, .. } => last_error.as_deref(),
            _ => None,
        }
    }
}

pub(super) type Result<T> = std::result::Result<T, NcclError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_result_code_decodes_by_name() {
        let names = [
            "ncclSuccess",
            "ncclUnhandledCudaError",
            "ncclSystemError",
            "ncclInternalError",
            "ncclInvalidArgument",
            "ncclInvalidUsage",
            "ncclRemoteError",
            "ncclInProgress",
        ];
        for (raw, name) in names.iter().enumerate() {
            let code = ResultCode::from_raw(raw as u32);
            assert_eq!(code.name(), *name);
            assert_eq!(code.raw(), raw as u32);
        }
        assert_eq!(ResultCode::from_raw(8), ResultCode::Unexpected(8));
        assert_eq!(ResultCode::from_raw(8).name(), "ncclResult_t(8)");
    }

    #[test]
    fn call_errors_carry_code_text_and_last_error() {
        let e = NcclError::Call {
            call: "ncclCommInitRank",
            code: ResultCode::UnhandledCudaError,
            text: "unhandled cuda error".into(),
            last_error: Some("Cuda failure 'CUDA driver version is insufficient'".into()),
        };
        assert_eq!(
            e.to_string(),
            "ncclCommInitRank returned ncclUnhandledCudaError (1): unhandled cuda error — last error: Cuda failure 'CUDA driver version is insufficient'"
        );
    }
}
