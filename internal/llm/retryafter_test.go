package llm

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter: the wait an answer asks for, from retry-after-ms, from
// Retry-After in seconds or as a date; none without those headers.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		header map[string]string
		want   time.Duration
	}{
		{map[string]string{"retry-after-ms": "1500", "Retry-After": "9"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": "2"}, 2 * time.Second},
		{map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{nil, 0},
	} {
		resp := &http.Response{Header: http.Header{}}
		for k, v := range tc.header {
			resp.Header.Set(k, v)
		}
		if got := retryAfter(resp, now); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.header, got, tc.want)
		}
	}
	if retryAfter(nil, now) != 0 {
		t.Error("no answer asks for no wait")
	}
}
