package ddl

// AlterRoute is ALTER ROUTE name WITH (option = value, ...) or ALTER
// ROUTE name RESET (option, ...). Options are link, pool and the path
// emulation options of a route; a RESET option, like one whose value is
// DEFAULT, is returned with a Value of Kind Default and clears the
// option.
type AlterRoute struct {
	base
	Name    Name
	Options []Option
}

// alterRoute reads what follows ALTER ROUTE.
func (p *parser) alterRoute() (node, error) {
	n, err := p.name()
	if err != nil {
		return nil, err
	}
	if !p.accept("reset") {
		opts, err := p.withOptions()
		if err != nil {
			return nil, err
		}
		if len(opts) == 0 {
			return nil, p.syntaxError()
		}
		return &AlterRoute{Name: n, Options: opts}, nil
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	opts, err := p.optionList(func(t token) (Value, error) {
		return Value{Kind: Default, Text: "default", Pos: t.pos}, nil
	})
	if err != nil {
		return nil, err
	}
	return &AlterRoute{Name: n, Options: opts}, nil
}
