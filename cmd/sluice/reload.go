package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/sluicelab/sluice/internal/admin"
	"github.com/sluicelab/sluice/internal/httpapi"
)

type reloadFlags struct {
	http    string
	admin   string
	timeout time.Duration
}

func newReload() *cobra.Command {
	var f reloadFlags
	cmd := &cobra.Command{
		Use:   "reload (--http ADDR | --admin ADDR)",
		Short: "Make a running sluice re-read its configuration",
		Long: `Make a running 'sluice serve' re-read the --config file it was started with
(and its flags and environment) and apply it, as SIGHUP does: through its HTTP
API (POST /api/reload; the token from SLUICE_HTTP_TOKEN) or its admin console
(the statement RELOAD, as user admin; the password from SLUICE_ADMIN_PASSWORD).
It prints what changed; a configuration refused (it names the file, key and
value) exits 1 and the running configuration stays.`,
		Example: `  sluice reload --http 127.0.0.1:8474
  SLUICE_ADMIN_PASSWORD=secret sluice reload --admin 127.0.0.1:6433`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (f.http == "") == (f.admin == "") {
				return usageErr(errors.New("give one of --http ADDR and --admin ADDR"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			var (
				lines []string
				err   error
			)
			if f.http != "" {
				lines, err = reloadHTTP(ctx, f.http, os.Getenv("SLUICE_HTTP_TOKEN"))
			} else {
				lines, err = reloadAdmin(ctx, f.admin, os.Getenv("SLUICE_ADMIN_PASSWORD"))
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "configuration reloaded")
			for _, l := range lines {
				fmt.Fprintln(out, l)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.http, "http", "", "HTTP API address of the running sluice (host:port)")
	fl.StringVar(&f.admin, "admin", "", "admin console address of the running sluice (host:port)")
	fl.DurationVar(&f.timeout, "timeout", time.Minute, "give up after this long")
	return cmd
}

// reloadHTTP sends POST /api/reload to the HTTP API at addr and returns
// the changes, one line each.
func reloadHTTP(ctx context.Context, addr, token string) ([]string, error) {
	u := url.URL{Scheme: "http", Host: addr, Path: "/api/reload"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	req.Header.Set(httpapi.RequestHeader, "reload")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reload through %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, httpapi.MaxBody))
	if err != nil {
		return nil, fmt.Errorf("reload through %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e httpapi.Error
		if json.Unmarshal(body, &e) != nil || e.Message == "" {
			return nil, fmt.Errorf("reload through %s: %s", addr, resp.Status)
		}
		return nil, errors.New(e.Message)
	}
	var r httpapi.ReloadResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("reload through %s: reading the answer: %w", addr, err)
	}
	return admin.ChangeNotices(r.Changes), nil
}

// adminURL is the URL of the admin console at addr (host:port) as user
// with password, without TLS.
func adminURL(addr, user, password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: addr, Path: "/sluice", RawQuery: "sslmode=disable"}
	return u.String()
}

// reloadAdmin runs RELOAD on the admin console at addr as user admin and
// returns its notices: the changes, one line each.
func reloadAdmin(ctx context.Context, addr, password string) ([]string, error) {
	cfg, err := pgconn.ParseConfig(adminURL(addr, admin.DefaultUser, password))
	if err != nil {
		return nil, fmt.Errorf("--admin: %w", err)
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("reload through %s: %w", addr, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "RELOAD").ReadAll(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, errors.New(pe.Message)
		}
		return nil, fmt.Errorf("reload through %s: %w", addr, err)
	}
	return notices, nil
}
