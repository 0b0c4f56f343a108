package admin

import (
	"context"
	"errors"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Reloader is the configuration in force and the way to re-read it, for
// RELOAD and SHOW CONFIG; package stack provides it. Both are safe for
// concurrent use.
type Reloader interface {
	// ReloadConfig re-reads the configuration the process started
	// with and applies it; an error means it was refused (a
	// *config.Error inside names the file, key and value).
	ReloadConfig(ctx context.Context) (config.Changes, error)
	// ConfigView describes the configuration in force, secrets
	// omitted.
	ConfigView() config.View
}

// reloadStatement runs RELOAD and SHOW CONFIG; ok is false for any
// other statement. Without a Reloader both are 0A000.
func (c *conn) reloadStatement(ctx context.Context, st ddl.Statement) (res wlm.Result, ok bool, err error) {
	show, isShow := st.(*ddl.Show)
	_, isReload := st.(*ddl.Reload)
	if !isReload && (!isShow || show.Name != "config") {
		return wlm.Result{}, false, nil
	}
	rl := c.s.reloader
	if rl == nil {
		return wlm.Result{}, true, ddl.Errorf(sqlstate.FeatureNotSupported, st.Position(), "this console has no configuration to show or reload")
	}
	if isShow {
		res = wlm.Result{Tag: "SHOW", Columns: []string{"key", "value"}}
		for _, kv := range rl.ConfigView().Rows() {
			res.Rows = append(res.Rows, []string{kv[0], kv[1]})
		}
		return res, true, nil
	}
	c.s.log.Info("admin console: RELOAD", "client", c.pc.RemoteAddr().String())
	ch, err := rl.ReloadConfig(ctx)
	if err != nil {
		code := sqlstate.SystemError
		if errors.As(err, new(*config.Error)) {
			code = sqlstate.ConfigFileError
		}
		e := ddl.Errorf(code, 0, "reload refused; configuration unchanged: %s", err.Error())
		return wlm.Result{}, true, e
	}
	return wlm.Result{Tag: "RELOAD", Notices: ChangeNotices(ch)}, true, nil
}

// ChangeNotices describes a reload's changes one line each ("route pg
// added"), or says that nothing changed.
func ChangeNotices(ch config.Changes) []string {
	var out []string
	add := func(names []string, what string) {
		for _, n := range names {
			out = append(out, "route "+n+" "+what)
		}
	}
	add(ch.Added, "added")
	add(ch.Removed, "removed (draining)")
	for _, n := range ch.Changed {
		what := "changed"
		for _, m := range ch.Relisten {
			if m == n {
				what = "changed (new listen address; the old one is draining)"
			}
		}
		out = append(out, "route "+n+" "+what)
	}
	if len(out) == 0 {
		out = append(out, "no route changed")
	}
	return out
}
