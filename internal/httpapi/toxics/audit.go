package toxics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Auditor records a change in the audit trail. *wlm.AuditLog is one: the
// log the Manager records the console's changes in (SHOW AUDIT,
// GET /api/audit), given to the Manager as ManagerOptions.Audit.
type Auditor interface {
	Record(now time.Time, a wlm.Actor, statement string, err error) wlm.AuditEntry
}

// audit records a change made through the API under ctx (whose Actor
// says who asked) as statement, with its outcome err, and logs it as the
// Manager logs a catalog change. It does nothing without an Auditor.
func (s *Service) audit(ctx context.Context, statement string, err error) {
	if s.aud == nil {
		return
	}
	a, _ := wlm.ActorFrom(ctx)
	e := s.aud.Record(s.clk.Now(), a, statement, auditErr(err))
	attrs := []any{"surface", e.Surface, "user", e.User, "client_addr", e.Addr, "statement", e.Statement, "outcome", e.Outcome()}
	if err != nil {
		attrs = append(attrs, "code", e.Code, "err", e.Error)
	}
	s.log.Info("catalog change", attrs...)
}

// auditErr gives an API error the SQLSTATE the audit trail shows for
// it: 400 invalid_parameter_value, 403 insufficient_privilege, 404
// undefined_object, 409 duplicate_object, anything else internal_error.
func auditErr(err error) error {
	var e *Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	code := sqlstate.InternalError
	switch e.Status {
	case http.StatusBadRequest:
		code = sqlstate.InvalidParameterValue
	case http.StatusForbidden:
		code = sqlstate.InsufficientPrivilege
	case http.StatusNotFound:
		code = sqlstate.UndefinedObject
	case http.StatusConflict:
		code = sqlstate.DuplicateObject
	}
	return &ddl.Error{Code: code, Message: e.Message}
}

// The texts of the changes, as the audit trail shows them. They name
// the proxy and toxic and give the values set; none of them carries a
// secret (addresses are host:port, attributes numbers).

func proxyText(verb, name string, c Config) string {
	var b strings.Builder
	b.WriteString("TOXIPROXY " + verb + " PROXY " + quoteIdent(name))
	if c.Listen != nil {
		b.WriteString(" LISTEN " + quoteLit(*c.Listen))
	}
	if c.Upstream != nil {
		b.WriteString(" UPSTREAM " + quoteLit(*c.Upstream))
	}
	if c.Enabled != nil {
		b.WriteString(" ENABLED " + strconv.FormatBool(*c.Enabled))
	}
	return b.String()
}

func toxicText(verb, proxyName string, t Toxic, toxicity *float64) string {
	var b strings.Builder
	b.WriteString("TOXIPROXY " + verb + " TOXIC ")
	if t.Name != "" {
		b.WriteString(quoteIdent(t.Name) + " ")
	}
	b.WriteString("ON " + quoteIdent(proxyName))
	if t.Type != "" {
		b.WriteString(" TYPE " + quoteLit(t.Type))
	}
	if t.Stream != "" {
		b.WriteString(" STREAM " + quoteLit(t.Stream))
	}
	if toxicity != nil {
		b.WriteString(" TOXICITY " + strconv.FormatFloat(*toxicity, 'g', -1, 64))
	}
	if len(t.Attributes) > 0 {
		b.WriteString(" ATTRIBUTES (")
		for i, k := range slices.Sorted(maps.Keys(t.Attributes)) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s = %d", quoteIdent(k), t.Attributes[k])
		}
		b.WriteString(")")
	}
	return b.String()
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
