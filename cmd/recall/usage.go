package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// helpOut is where -h writes a command's usage (tests replace it). Asked
// for, help is output: stdout, where it can be piped to a pager.
var helpOut io.Writer = os.Stdout

// examples are one or more example invocations per command, keyed by the
// flag set's name without "recall " (a subcommand such as "memory get"
// falls back to its command's). -h prints them after the flags, whatever
// usage function the command set.
var examples = map[string]string{
	"up":               "recall up --data ./data --http 127.0.0.1:8080 --nats-listen 127.0.0.1:4222",
	"demo":             "recall demo --json",
	"replay":           "recall replay internal/importer/testdata/coding-session.jsonl --session demo1",
	"memory":           "recall memory get --session demo1\n  recall memory history --session demo1",
	"compact":          "recall compact --session demo1 --min-tokens 2000",
	"extract":          "recall extract --session demo1\n  recall extract --failed",
	"edit":             "recall edit --session demo1 --thinking 1",
	"config":           "recall config | grep NATS",
	"bench":            "recall bench --quick",
	"eval":             "recall eval --quick",
	"nats-permissions": "recall nats-permissions --tenant acme",
	"probe":            "recall probe http://127.0.0.1:8080/readyz",
	"sessions":         "recall sessions ls --q refactor\n  recall sessions show --session demo1",
	"index":            "recall index --session demo1",
	"resolve":          "recall resolve 'fix the login bug~2'",
	"query":            "recall query --session demo1 --question 'which tests failed?'",
	"ltm":              "recall ltm show --user alice\n  recall ltm history --user alice --type preferences",
	"commit":           "recall commit --session demo1",
	"erase":            "recall erase --session demo1\n  recall erase --user alice --sessions",
	"export":           "recall export --session demo1 > demo1.jsonl",
	"migrate":          "recall migrate --shards 8 --dry-run\n  recall migrate --shards 8",
	"tenant":           "recall tenant get --tenant acme\n  recall tenant validate acme.json",
	"watch":            "recall watch ~/.claude/projects",
	"hook":             "recall hook < hook-input.json",
	"mcp":              "claude mcp add recall -- recall mcp",
	"ingest":           "RECALL_NATS_URL=nats://127.0.0.1:4222 recall ingest",
	"trigger":          "RECALL_NATS_URL=nats://127.0.0.1:4222 recall trigger",
	"extractor":        "RECALL_NATS_URL=nats://127.0.0.1:4222 recall extractor",
	"compactor":        "RECALL_NATS_URL=nats://127.0.0.1:4222 recall compactor",
	"indexer":          "RECALL_NATS_URL=nats://127.0.0.1:4222 recall indexer",
	"longterm":         "RECALL_NATS_URL=nats://127.0.0.1:4222 recall longterm",
	"gateway":          "RECALL_NATS_URL=nats://127.0.0.1:4222 recall gateway",
}

// helpFirst is the subcommand whose flags `recall <command> -h` shows for
// commands that take a subcommand first.
var helpFirst = map[string]string{"memory": "get", "sessions": "ls", "ltm": "show", "tenant": "get"}

// newFlags returns a flag set for a subcommand that reports errors instead
// of exiting; its usage names the command, its summary and its flags.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("recall "+name, flag.ContinueOnError)
	fs.SetOutput(helpOut)
	setUsage(fs, name+" [flags]")
	return fs
}

// setUsage replaces fs's usage with "Usage: recall <synopsis>", the
// command's summary and its flags.
func setUsage(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: recall %s\n", synopsis)
		if c, ok := findCommand(commandName(fs)); ok {
			fmt.Fprintf(w, "\n%s.\n", upperFirst(c.summary))
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			fmt.Fprintln(w, "\nNo flags.")
			return
		}
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
}

// parseFlags parses args. -h prints the usage and an example and returns
// flag.ErrHelp; any other flag error is returned once, as a usage error
// (the flag package's own printing of it is dropped).
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		_, _ = buf.WriteTo(out)
		printExample(out, fs)
		return err
	}
	return fmt.Errorf("%w: %v (see '%s -h')", errUsage, err, fs.Name())
}

// printExample writes the command's example, if it has one.
func printExample(w io.Writer, fs *flag.FlagSet) {
	name := strings.TrimPrefix(fs.Name(), "recall ")
	ex, ok := examples[name]
	if !ok {
		ex, ok = examples[commandName(fs)]
	}
	if ok {
		fmt.Fprintf(w, "\nExample:\n  %s\n", ex)
	}
}

// commandName is the command a flag set belongs to ("memory" for
// "recall memory get").
func commandName(fs *flag.FlagSet) string {
	name := strings.TrimPrefix(fs.Name(), "recall ")
	name, _, _ = strings.Cut(name, " ")
	return name
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}
