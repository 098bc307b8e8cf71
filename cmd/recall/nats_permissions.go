package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/recallhq/recall/internal/natsperm"
)

func runNATSPermissions(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("nats-permissions")
	tenant := fs.String("tenant", "", "tenant whose platform user to print")
	user := fs.String("user", "", "NATS user name (default tenant-<tenant>)")
	service := fs.String("service", "", "print a service user instead: ingest, trigger, extractor, compactor or all")
	nkey := fs.String("nkey", "", "authenticate the user by this public nkey (U...) instead of user and password (conf format)")
	format := fs.String("format", "conf", "output format: conf (nats-server authorization.users entries) or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*tenant == "") == (*service == "") {
		return fmt.Errorf("%w: give exactly one of --tenant or --service", errUsage)
	}
	if *format != "conf" && *format != "json" {
		return fmt.Errorf("%w: --format must be conf or json, not %q", errUsage, *format)
	}
	var users []natsperm.User
	switch {
	case *tenant != "":
		u, err := natsperm.Tenant(*tenant, *user)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		users = append(users, u)
	case *service == "all":
		users = natsperm.AllServices()
	default:
		u, err := natsperm.Service(*service)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if *user != "" {
			u.Name = *user
		}
		users = append(users, u)
	}
	if *nkey != "" && len(users) != 1 {
		return fmt.Errorf("%w: --nkey needs a single user", errUsage)
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if len(users) == 1 {
			return enc.Encode(users[0])
		}
		return enc.Encode(users)
	}
	for i, u := range users {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if _, err := io.WriteString(stdout, u.Conf(*nkey, u.PasswordEnv())); err != nil {
			return err
		}
	}
	return nil
}
