package envconf_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/envconf"
)

type inner struct {
	URL   string `envconfig:"URL" default:"nats://x:4222"`
	Token string `envconfig:"TOKEN" secret:"true"`
}

func (c inner) LogValue() slog.Value { return envconf.LogValue(c) }

type Flat struct {
	Shards int `envconfig:"SHARDS" default:"4"`
}

type sample struct {
	NATS inner
	Flat
	Count    int           `envconfig:"COUNT" default:"7"`
	Every    int           `envconfig:"EVERY" default:"2000" negative:"ok"`
	Wait     time.Duration `envconfig:"WAIT" default:"1m30s"`
	Ratio    float64       `envconfig:"RATIO" default:"0.5"`
	On       bool          `envconfig:"ON" default:"true"`
	Name     string        `envconfig:"NAME" default:"x"`
	Key      string        `envconfig:"KEY" secret:"true"`
	NoDef    int           `envconfig:"NODEF"`
	Internal int           `ignored:"true" default:"9"`
}

// TestDefaultsMatchEnvconfig: a literal gets what envconfig gives from an
// empty environment.
func TestDefaultsMatchEnvconfig(t *testing.T) {
	var fromEnv sample
	if err := envconfig.Process("ENVCONF_TEST_NOTHING_SET", &fromEnv); err != nil {
		t.Fatal(err)
	}
	var lit sample
	envconf.Defaults(&lit)
	lit.Internal = fromEnv.Internal
	if lit != fromEnv {
		t.Fatalf("literal %+v, environment %+v", lit, fromEnv)
	}
	if lit.Count != 7 || lit.Wait != 90*time.Second || lit.NATS.URL != "nats://x:4222" || lit.Shards != 4 || !lit.On {
		t.Fatalf("defaults not applied: %+v", lit)
	}
}

func TestDefaultsKeepSetValues(t *testing.T) {
	s := sample{Count: 3, Every: -1, Wait: time.Second, Name: "y"}
	s.Shards = 12
	envconf.Defaults(&s)
	if s.Count != 3 || s.Every != -1 || s.Wait != time.Second || s.Name != "y" || s.Shards != 12 {
		t.Fatalf("set values changed: %+v", s)
	}
	s = sample{Count: -5}
	envconf.Defaults(&s)
	if s.Count != 7 {
		t.Fatalf("a negative count without negative:\"ok\" kept: %d", s.Count)
	}
}

func TestLogValueNamesAndMasks(t *testing.T) {
	s := sample{Key: "sk-secret", Count: 2}
	s.NATS.Token = "tok-secret"
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("cfg", "config", envconf.LogValue(s))
	out := buf.String()
	for _, want := range []string{"config.count=2", "config.key=***", "config.nats.token=***", "config.shards=0", "config.nodef=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("a secret leaked: %s", out)
	}
}
