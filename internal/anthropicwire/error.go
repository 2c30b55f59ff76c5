package anthropicwire

// ErrorBody is the error envelope, {"type": "error", "error": {"type",
// "message"}}, as an error answer's body and as a stream's error event;
// request_id is omitted when empty.
type ErrorBody struct {
	Error     ErrorDetail `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
	Type      string      `json:"type"`
}

// ErrorDetail is the error of an ErrorBody.
type ErrorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// Error is the envelope of an error of type typ.
func Error(typ, message, requestID string) ErrorBody {
	return ErrorBody{Type: "error", Error: ErrorDetail{Type: typ, Message: message}, RequestID: requestID}
}
