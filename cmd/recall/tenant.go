package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
)

const tenantUsage = `Usage: recall tenant <get|set|edit|validate|history> [flags]

  get             print the configuration (JSON)
  set FILE        replace it with FILE ("-": stdin); --if-match REV for compare-and-set
  edit            open it in $EDITOR and store the result (compare-and-set)
  validate FILE   check FILE locally and print every invalid field
  history         list the kept revisions: when, who, what changed

The fields are described in docs/tenant-config.md. get, set, edit and
history talk to Recall's HTTP edge: --recall-url ($RECALL_URL), --token
($RECALL_TOKEN: a tenant's token acts on its tenant; an operator token
needs --tenant).`

// errInvalidConfig marks a configuration with invalid fields (printed).
var errInvalidConfig = errors.New("the configuration is not valid")

func runTenant(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, tenantUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	if sub == "validate" {
		return tenantValidate(args, stdout)
	}
	c, rest, err := newTenantClient("tenant "+sub, args)
	if err != nil {
		return err
	}
	switch sub {
	case "get":
		return c.get(ctx, stdout)
	case "set":
		if len(rest) != 1 {
			return fmt.Errorf("%w: recall tenant set FILE", errUsage)
		}
		return c.set(ctx, rest[0], stdout)
	case "edit":
		return c.edit(ctx, stdout)
	case "history":
		return c.history(ctx, stdout)
	}
	return fmt.Errorf("%w: unknown tenant command %q (get, set, edit, validate, history)", errUsage, sub)
}

// tenantValidate checks a file with the validator the API uses.
func tenantValidate(args []string, stdout io.Writer) error {
	fs := newFlags("tenant validate")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: recall tenant validate FILE", errUsage)
	}
	doc, err := readDoc(fs.Arg(0))
	if err != nil {
		return err
	}
	lim, err := tenantCeilings()
	if err != nil {
		return err
	}
	if _, err := lim.Parse(doc); err != nil {
		return printInvalid(stdout, err)
	}
	fmt.Fprintln(stdout, "valid")
	return nil
}

// tenantCeilings are the operator's ceilings (RECALL_TENANT_MAX_*), the
// ones the configuration API checks.
func tenantCeilings() (tenantcfg.Ceilings, error) {
	var lim tenantcfg.Ceilings
	if err := envconfig.Process(svcmain.EnvPrefix+"_TENANT_MAX", &lim); err != nil {
		return lim, fmt.Errorf("reading RECALL_TENANT_MAX_*: %w", err)
	}
	return lim, nil
}

// printInvalid prints every field error of an *InvalidError.
func printInvalid(w io.Writer, err error) error {
	var ie *tenantcfg.InvalidError
	if !errors.As(err, &ie) {
		return err
	}
	printFieldErrors(w, ie.Errors)
	return errInvalidConfig
}

func printFieldErrors(w io.Writer, errs []events.ConfigFieldError) {
	for _, f := range errs {
		field := f.Field
		if field == "" {
			field = "(document)"
		}
		fmt.Fprintf(w, "%s: %s\n", field, f.Error)
	}
}

func readDoc(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// tenantClient reaches GET/PUT /v1/config and its history over HTTP.
type tenantClient struct {
	base, token, tenant string
	ifMatch             string
	http                *http.Client
}

func newTenantClient(name string, args []string) (*tenantClient, []string, error) {
	fs := newFlags(name)
	c := &tenantClient{http: &http.Client{Timeout: 30 * time.Second}}
	fs.StringVar(&c.base, "recall-url", envOr("RECALL_URL", "http://127.0.0.1:8080"), "base URL of Recall's HTTP edge (default $RECALL_URL or http://127.0.0.1:8080)")
	fs.StringVar(&c.token, "token", os.Getenv("RECALL_TOKEN"), "bearer token: a tenant's (its own configuration) or an operator's (with --tenant) (default $RECALL_TOKEN)")
	fs.StringVar(&c.tenant, "tenant", "", "the tenant (operator tokens)")
	fs.StringVar(&c.ifMatch, "if-match", "", "set: store only if the stored revision is this one (0: only if none is stored)")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), tenantUsage); fs.PrintDefaults() }
	if err := parseTenantFlags(fs, args); err != nil {
		return nil, nil, err
	}
	return c, fs.Args(), nil
}

// parseTenantFlags parses flags before and after the positional argument.
func parseTenantFlags(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// do sends one request; a problem answer becomes an error (field errors
// printed to w).
func (c *tenantClient) do(ctx context.Context, method, path string, hdr map[string]string, body []byte, w io.Writer) ([]byte, http.Header, error) {
	u := strings.TrimSuffix(c.base, "/") + path
	if c.tenant != "" {
		u += "?tenant=" + url.QueryEscape(c.tenant)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("reaching Recall at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		return b, resp.Header, nil
	}
	var p struct {
		Detail string                    `json:"detail"`
		Errors []events.ConfigFieldError `json:"errors"`
	}
	_ = json.Unmarshal(b, &p)
	if len(p.Errors) > 0 {
		printFieldErrors(w, p.Errors)
		return nil, nil, errInvalidConfig
	}
	return nil, nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, p.Detail)
}

func (c *tenantClient) read(ctx context.Context, w io.Writer) (events.ConfigReply, error) {
	var r events.ConfigReply
	b, _, err := c.do(ctx, http.MethodGet, "/v1/config", nil, nil, w)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	return r, err
}

func (c *tenantClient) get(ctx context.Context, stdout io.Writer) error {
	r, err := c.read(ctx, stdout)
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(r.Config, "", "  ")
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

func (c *tenantClient) set(ctx context.Context, path string, stdout io.Writer) error {
	doc, err := readDoc(path)
	if err != nil {
		return err
	}
	return c.put(ctx, doc, c.ifMatch, stdout)
}

// put validates doc locally, then stores it under ifMatch.
func (c *tenantClient) put(ctx context.Context, doc []byte, ifMatch string, stdout io.Writer) error {
	lim, err := tenantCeilings()
	if err != nil {
		return err
	}
	if _, err := lim.Parse(doc); err != nil {
		return printInvalid(stdout, err)
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	if ifMatch != "" {
		hdr["If-Match"] = ifMatch
	}
	b, _, err := c.do(ctx, http.MethodPut, "/v1/config", hdr, doc, stdout)
	if err != nil {
		return err
	}
	var r events.ConfigReply
	_ = json.Unmarshal(b, &r)
	fmt.Fprintf(stdout, "stored revision %d of %s\n", r.Revision, r.Tenant)
	return nil
}
