// Package envconftest checks, in a service's tests, that a Config literal
// gets the defaults its environment variables would give (internal/envconf).
package envconftest

import (
	"log/slog"
	"testing"

	"github.com/kelseyhightower/envconfig"
)

// unsetPrefix names no variable of any environment.
const unsetPrefix = "RECALL_DEFAULTS_TEST_UNSET"

// FromEnvironment is a T read by envconfig from an environment that sets
// none of its variables: the defaults of its tags.
func FromEnvironment[T any](t testing.TB) T {
	t.Helper()
	var cfg T
	if err := envconfig.Process(unsetPrefix, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// SameDefaults fails t unless literal (a Config literal with its defaults
// applied) logs exactly like fromEnv: every tagged field alike.
func SameDefaults(t testing.TB, literal, fromEnv slog.LogValuer) {
	t.Helper()
	if literal.LogValue().String() != fromEnv.LogValue().String() {
		t.Fatalf("a literal's defaults %v\nthe environment's %v", literal.LogValue(), fromEnv.LogValue())
	}
}
