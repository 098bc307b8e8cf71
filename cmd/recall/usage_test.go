package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// Every command's -h prints its usage, its flags and an example, on the
// help output and nothing else.
func TestEveryCommandHelp(t *testing.T) {
	var out bytes.Buffer
	old := helpOut
	helpOut = &out
	t.Cleanup(func() { helpOut = old })
	names := map[string]bool{}
	for _, c := range commandList() {
		name := c.name
		if names[name] {
			t.Errorf("two commands named %s", name)
		}
		names[name] = true
		t.Run(name, func(t *testing.T) {
			out.Reset()
			err := run(context.Background(), []string{name, "-h"}, &out)
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("-h: %v", err)
			}
			got := out.String()
			for _, want := range []string{"Usage", "recall " + name, "Example:\n  "} {
				if !strings.Contains(got, want) {
					t.Errorf("-h lacks %q:\n%s", want, got)
				}
			}
			if strings.Count(got, "\n") < 4 {
				t.Errorf("-h is one line:\n%s", got)
			}
		})
	}
}

// A mistyped flag is one error naming the flag and where the flags are
// listed; nothing is printed besides it.
func TestMistypedFlagOneError(t *testing.T) {
	var out bytes.Buffer
	old := helpOut
	helpOut = &out
	t.Cleanup(func() { helpOut = old })
	err := run(context.Background(), []string{"compact", "--sesion", "x"}, &out)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-sesion") || !strings.Contains(err.Error(), "recall compact -h") {
		t.Fatalf("error: %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("printed besides the error:\n%s", out.String())
	}
}
