package claimcheck

import "testing"

func TestInlineLimit(t *testing.T) {
	for _, tc := range []struct {
		maxPayload int64
		configured int
		want       int
	}{
		{1 << 20, 512 << 10, 512 << 10},          // the default server: the configured size
		{1 << 20, 1 << 20, 1<<20 - 64<<10},       // room for headers under max_payload
		{64 << 10, 512 << 10, 48 << 10},          // a small max_payload still takes events inline
		{8 << 20, 512 << 10, 512 << 10},          // a large one changes nothing
		{256 << 10, 512 << 10, 256<<10 - 64<<10}, // room capped at 64 KiB
	} {
		if got := InlineLimit(tc.maxPayload, tc.configured); got != tc.want {
			t.Errorf("InlineLimit(%d, %d) = %d, want %d", tc.maxPayload, tc.configured, got, tc.want)
		}
	}
}
