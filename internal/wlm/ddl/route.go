package ddl

import "strings"

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
	var opts []Option
	for {
		t, ok := p.acceptName()
		if !ok {
			return nil, p.syntaxError()
		}
		name := strings.ToLower(t.val)
		o := Option{Name: name, NamePos: t.pos, Value: Value{Kind: Default, Text: "default", Pos: t.pos}}
		if opts, err = addOption(opts, o, name); err != nil {
			return nil, err
		}
		if p.acceptOp(")") {
			return &AlterRoute{Name: n, Options: opts}, nil
		}
		if err := p.expectOp(","); err != nil {
			return nil, err
		}
	}
}
