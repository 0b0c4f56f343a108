package catalog

import (
	"strings"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// routeOptions are the options of ALTER ROUTE: the link and default pool
// of the route, and the path emulation options.
var routeOptions = append([]string{"link", "pool"}, emulationOptions...)

// CheckRouteEmulation checks ALTER ROUTE's path emulation option o as
// the route's emulation would read it: nil when its value is valid (or
// DEFAULT), else the 22023 error naming it, at its position. link and
// pool are the caller's; any other name is an unrecognized route
// parameter (22023).
func CheckRouteEmulation(o ddl.Option) error {
	var e Emulation
	ok, err := setEmulation(&e, o)
	if err != nil {
		return err
	}
	if !ok {
		e := ddl.Errorf(sqlstate.InvalidParameterValue, o.NamePos, "unrecognized route parameter %q", o.Name)
		e.Hint = "Valid parameters: " + strings.Join(routeOptions, ", ") + "."
		return e
	}
	if err := e.Validate(); err != nil {
		return badValue(o.Name, o.Value, err)
	}
	return nil
}
