package mysql

import (
	"context"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// killer cancels the running statement of one session the way MySQL
// does: from a second connection to the same server, with KILL QUERY and
// the session's upstream connection id (the thread id of the greeting).
// The server interrupts the statement, which fails with ER_QUERY_INTERRUPTED
// (1317) or, for some, ends early; the session itself survives.
type killer struct {
	o      *Options
	log    *slog.Logger
	dial   wire.Dialer
	sess   *session.Session
	connID uint32
}

var _ session.Canceler = (*killer)(nil)

// Cancel implements session.Canceler. Each call opens a side connection
// as KillUser, checks that a statement whose cancel was requested is
// still running (KILL QUERY hits whatever the connection runs by the
// time it arrives, so the check narrows, but cannot close, the window in
// which it would interrupt the next statement instead), and runs
// KILL QUERY. It returns session.ErrNotRunning if no such statement runs.
func (k *killer) Cancel(ctx context.Context) error {
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Passwd = k.o.KillUser, k.o.KillPassword
	cfg.Net, cfg.Addr = wire.Network(k.o.Upstream), k.o.Upstream
	cfg.Timeout = k.o.ConnectTimeout
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return k.dial(ctx) }
	cfg.Logger = driverLogger{k.log}
	if k.o.UpstreamTLS != nil {
		cfg.TLS = k.o.UpstreamTLS.Clone()
	}
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("mysql: kill connection: %w", err)
	}
	c, err := connector.Connect(ctx)
	if err != nil {
		return fmt.Errorf("mysql: kill connection to %s: %w", k.o.Upstream, err)
	}
	defer c.Close()
	if !k.wanted() {
		return session.ErrNotRunning
	}
	ex, ok := c.(driver.ExecerContext)
	if !ok {
		return fmt.Errorf("mysql: kill connection cannot execute statements")
	}
	q := "KILL QUERY " + strconv.FormatUint(uint64(k.connID), 10)
	if _, err := ex.ExecContext(ctx, q, nil); err != nil {
		return fmt.Errorf("mysql: %s: %w", q, err)
	}
	k.log.Debug("mysql: statement cancelled", "session", k.sess.ID, "upstream_connection", k.connID)
	return nil
}

// wanted reports whether a running statement of the session is marked
// for cancellation.
func (k *killer) wanted() bool {
	for _, st := range k.sess.Active() {
		if st.CancelRequested() && st.Outcome() == session.Running {
			return true
		}
	}
	return false
}

// driverLogger routes the driver's messages to the route's logger.
type driverLogger struct{ log *slog.Logger }

func (l driverLogger) Print(v ...any) { l.log.Debug("mysql: kill connection: " + fmt.Sprint(v...)) }
