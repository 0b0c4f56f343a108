package ddl

import "fmt"

// Statement is one parsed statement: *Create, *Alter, *AlterRoute,
// *Drop, *Set, *Reset, *Show or *Select.
type Statement interface {
	// Position returns the 1-based character position of the statement's
	// first token in the text given to Parse.
	Position() int
	// Text returns the statement's source text, without the trailing
	// semicolon.
	Text() string
}

// Kind is the kind of catalog object a statement names.
type Kind uint8

// Object kinds.
const (
	Rule Kind = iota + 1 // EXCEPT RULE
	Pool                 // RESOURCE POOL
	Link                 // LINK
	User                 // USER (a user's binding to a pool)
)

// String returns the object kind as written in SQL ("EXCEPT RULE").
func (k Kind) String() string {
	switch k {
	case Rule:
		return "EXCEPT RULE"
	case Pool:
		return "RESOURCE POOL"
	case Link:
		return "LINK"
	case User:
		return "USER"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Noun returns the object kind in lower case for messages ("except rule").
func (k Kind) Noun() string {
	switch k {
	case Rule:
		return "except rule"
	case Pool:
		return "resource pool"
	case Link:
		return "link"
	case User:
		return "user"
	}
	return k.String()
}

// ValueKind says how a value was written.
type ValueKind uint8

// Value kinds.
const (
	Number  ValueKind = iota + 1 // 128, -1, 0.5, or with a unit: 10ms, 1.5GB
	String                       // 'quoted'
	Word                         // a bare word: penalty, on, high
	Default                      // the keyword DEFAULT
)

// Value is an option or setting value as written. Text is the number with
// its sign and unit, the unquoted string, or the bare word as written
// (not case-folded).
type Value struct {
	Kind ValueKind
	Text string
	Pos  int // 1-based character position
}

// Option is one name=value pair of a WITH (...) list, or a clause of
// CREATE/ALTER USER (resource_pool, password). Name is lower case.
type Option struct {
	Name    string
	NamePos int
	Value   Value
}

// Name is an object name: a bare identifier folded to lower case, a
// "quoted identifier" or a 'string' kept as written.
type Name struct {
	Name string
	Pos  int
}

type base struct {
	pos  int
	text string
}

func (b base) Position() int { return b.pos }
func (b base) Text() string  { return b.text }

// Create is CREATE EXCEPT RULE / RESOURCE POOL / LINK / USER, with IF
// NOT EXISTS after the object kind.
type Create struct {
	base
	Kind        Kind
	IfNotExists bool
	Name        Name
	Options     []Option
}

// Alter is ALTER EXCEPT RULE / RESOURCE POOL / LINK / USER. Options are
// the ones to change; an option whose value is DEFAULT is reset.
type Alter struct {
	base
	Kind    Kind
	Name    Name
	Options []Option
}

// Drop is DROP EXCEPT RULE / RESOURCE POOL / LINK / USER.
type Drop struct {
	base
	Kind     Kind
	Names    []Name
	IfExists bool
	Cascade  bool
}

// Set is SET name = value or SET name TO value. Value.Kind is Default for
// SET name TO DEFAULT.
type Set struct {
	base
	Name    string // lower case
	NamePos int
	Value   Value
}

// Reset is RESET name or RESET ALL (Name "all").
type Reset struct {
	base
	Name    string
	NamePos int
}

// Show is SHOW name: a setting, ALL, or a list such as SESSIONS; SHOW
// CLUSTER name is a list gathered over the fleet's live instances.
type Show struct {
	base
	Name    string // lower case
	NamePos int
	Cluster bool // SHOW CLUSTER name
	// RTT is the string of SHOW WHATIF RTT 'list' (added round-trip
	// times, "10ms" or "1ms,5ms"); "" without.
	RTT    string
	RTTPos int
}

// Target is one item of a SELECT list.
type Target struct {
	Pos   int
	Star  bool   // *
	Name  string // column name, or function name when Func is set; lower case
	Func  bool   // name(...) call
	Args  []Value
	Value *Value // a literal
	Alias string // AS alias; "" for none
}

// Select is the small SELECT the console answers: SELECT targets [FROM
// [schema.]table] [LIMIT n].
type Select struct {
	base
	Targets []Target
	Schema  string // lower case; "" if not qualified
	From    string // lower case table name; "" without FROM
	FromPos int
	Limit   int64 // -1 for none
}
