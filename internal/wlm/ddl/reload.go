package ddl

// Reload is RELOAD: re-read the configuration file the process started
// with and apply it (package stack), as PgBouncer's RELOAD does. It
// takes no arguments; the console runs it, not the workload manager.
type Reload struct {
	base
}

// reload parses what follows RELOAD: nothing.
func (p *parser) reload() (node, error) { return &Reload{}, nil }
