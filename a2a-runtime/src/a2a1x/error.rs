//! Errors of the bridge, in A2A 1.0's forms (BR-14): a JSON-RPC error object or an HTTP+JSON `google.rpc.Status`,
//! each with a `google.rpc.ErrorInfo` naming the A2A reason and this protocol's §12 code.

use a2a_core::a2a1x::ERROR_INFO_TYPE;
use a2a_core::error::{A2aError, ErrorCode};
use serde_json::{Value, json};

/// What kind of A2A 1.0 error (the rows of BR-14's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The body is not JSON.
    Parse,
    /// Not a JSON-RPC 2.0 request, or refused by policy (authentication, region).
    InvalidRequest,
    /// Unknown method.
    MethodNotFound,
    /// Bad parameters, skill, parts, limits, payload.
    InvalidParams,
    /// Unknown task.
    TaskNotFound,
    /// Cancel of a terminal task.
    TaskNotCancelable,
    /// Push notifications.
    PushNotSupported,
    /// `raw` / `url` parts.
    ContentType,
    /// `A2A-Version`.
    Version,
    /// Overload, store, internal.
    Internal,
}

impl Kind {
    fn jsonrpc_code(self) -> i64 {
        match self {
            Kind::Parse => -32700,
            Kind::InvalidRequest => -32600,
            Kind::MethodNotFound => -32601,
            Kind::InvalidParams => -32602,
            Kind::Internal => -32603,
            Kind::TaskNotFound => -32001,
            Kind::TaskNotCancelable => -32002,
            Kind::PushNotSupported => -32003,
            Kind::ContentType => -32005,
            Kind::Version => -32009,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Kind::Parse | Kind::InvalidRequest => "INVALID_REQUEST",
            Kind::MethodNotFound => "METHOD_NOT_FOUND",
            Kind::InvalidParams => "INVALID_PARAMS",
            Kind::Internal => "INTERNAL_ERROR",
            Kind::TaskNotFound => "TASK_NOT_FOUND",
            Kind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            Kind::PushNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Kind::ContentType => "CONTENT_TYPE_NOT_SUPPORTED",
            Kind::Version => "VERSION_NOT_SUPPORTED",
        }
    }
}

/// An error of a bridge operation.
#[derive(Debug, Clone)]
pub struct BridgeError {
    /// The A2A 1.0 kind.
    pub kind: Kind,
    /// For people: what happened and what to do.
    pub message: String,
    /// The §12 code behind it, when the error came from the handshake.
    pub code: Option<ErrorCode>,
    /// The HTTP status on the HTTP+JSON binding.
    pub http_status: u16,
}

impl BridgeError {
    /// An error of `kind` with its default HTTP status.
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        let http_status = match kind {
            Kind::MethodNotFound | Kind::TaskNotFound => 404,
            Kind::Internal => 500,
            _ => 400,
        };
        BridgeError { kind, message: message.into(), code: None, http_status }
    }

    /// Invalid parameters.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidParams, message)
    }

    /// The JSON-RPC `error` object.
    pub fn jsonrpc_error(&self) -> Value {
        json!({"code": self.kind.jsonrpc_code(), "message": self.message, "data": [self.error_info()]})
    }

    /// The HTTP+JSON error body (`google.rpc.Status`).
    pub fn http_body(&self) -> Value {
        let status = match self.http_status {
            400 | 413 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            503 => "UNAVAILABLE",
            _ => "INTERNAL",
        };
        let status = match self.kind {
            Kind::TaskNotCancelable | Kind::PushNotSupported | Kind::Version => "FAILED_PRECONDITION",
            _ => status,
        };
        json!({"error": {"code": self.http_status, "status": status, "message": self.message,
                         "details": [self.error_info()]}})
    }

    fn error_info(&self) -> Value {
        let mut info = json!({"@type": ERROR_INFO_TYPE, "reason": self.kind.reason(), "domain": "a2a-handshake"});
        if let Some(code) = &self.code {
            info["metadata"] = json!({"code": code.as_str()});
        }
        info
    }
}

impl From<A2aError> for BridgeError {
    /// Maps a handshake error to its BR-14 row.
    fn from(e: A2aError) -> Self {
        let status = e.http_status();
        let c = e.code.clone();
        let kind = if c == ErrorCode::UNKNOWN_EXECUTION {
            Kind::TaskNotFound
        } else if c == ErrorCode::INVALID_STATE {
            Kind::TaskNotCancelable
        } else if matches!(status, 401 | 403) {
            Kind::InvalidRequest
        } else if status >= 500 || status == 429 {
            Kind::Internal
        } else {
            Kind::InvalidParams
        };
        let mut message = e.message.clone();
        if let Some(d) = &e.details
            && (c == ErrorCode::PAYLOAD_INVALID || c == ErrorCode::SCHEMA_INCOMPATIBLE)
        {
            message = format!("{message} (details: {d})");
        }
        BridgeError {
            kind,
            message,
            code: Some(c),
            http_status: if kind == Kind::TaskNotCancelable { 400 } else { status },
        }
    }
}
