package gatewaysvc

import (
	"errors"
	"net/http"
)

// exchange is one request through the gateway and its response.
type exchange struct {
	g      *Gateway
	p      *provider
	w      http.ResponseWriter
	r      *http.Request
	path   string // upstream path, e.g. /v1/messages
	tenant string
	body   []byte
	// onResponse, when set, is given the upstream's response (compaction
	// puts its block before the upstream's answer).
	onResponse respHook
}

// serve handles the exchange: the model endpoints are read, captured and
// may be compacted; everything else is passed through as it streams.
func (x *exchange) serve() {
	if x.r.Method != http.MethodPost || !x.modelEndpoint() {
		x.p.forward(x.w, x.r, x.path, nil, nil)
		return
	}
	body, err := readBody(x.w, x.r, x.g.cfg.MaxBodyBytes)
	if err != nil {
		x.g.stats.Refused.Add(1)
		if errors.Is(err, errBodyTooLarge) {
			writeError(x.w, x.p.name, http.StatusRequestEntityTooLarge, "request_too_large", "the request body is larger than the Recall gateway's limit (RECALL_GATEWAY_MAX_BODY_BYTES)")
			return
		}
		writeError(x.w, x.p.name, http.StatusBadRequest, "invalid_request_error", "reading the request body: "+err.Error())
		return
	}
	x.body = body
	capture := x.captureHook() // the request as the client sent it
	if x.compaction() {
		return // answered from memory
	}
	x.p.forward(x.w, x.r, x.path, x.body, chainHooks(capture, x.onResponse))
}

// modelEndpoint reports whether the path is one the gateway reads.
func (x *exchange) modelEndpoint() bool {
	switch x.p.name + x.path {
	case "anthropic/v1/messages", "openai/v1/chat/completions", "openai/v1/responses", "openai/v1/responses/compact":
		return true
	}
	return false
}
