package gatewaysvc

import (
	"net/http"
	"strconv"
	"time"

	"github.com/recallhq/recall/services/gateway/wire"
)

// writeError answers in the provider's error shape: Anthropic's
// {"type":"error","error":{"type","message"}} or OpenAI's
// {"error":{"message","type","code"}}. typ is Anthropic's error type; the
// OpenAI shape takes it as its code. A refusal that a resend cannot change
// (a missing token, a body too large) says so with x-should-retry: false,
// the header both providers' SDKs and Claude Code obey (without it Claude
// Code resent a 401 eight times in 75 s).
func writeError(w http.ResponseWriter, provider string, status int, typ, msg string) {
	if status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout {
		w.Header().Set("X-Should-Retry", "false")
	}
	var body []byte
	if provider == providerOpenAI {
		body = wire.OpenAIErrorBody(openAIType(status), typ, msg)
	} else {
		body = wire.ErrorBody(typ, msg)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Recall-Gateway", "refused")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeRetry is writeError with a Retry-After header.
func writeRetry(w http.ResponseWriter, provider string, status int, typ, msg string, after time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(int(after/time.Second), 1)))
	writeError(w, provider, status, typ, msg)
}

func openAIType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "invalid_request_error"
	}
	return "server_error"
}
