package ddl

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/testenv"
)

// consoleDoc is the console reference, relative to this package.
const consoleDoc = "../../../doc/console.md"

// statementForms are the statements the parser accepts, as the console
// reference begins them: every first keyword of statements, CREATE,
// ALTER and DROP of every object kind, and the forms that a keyword
// after the first one selects, each with a statement that must parse
// as it (so none of them names a form the parser no longer takes).
func statementForms(t *testing.T) []string {
	var forms []string
	for kw := range statements {
		forms = append(forms, strings.ToUpper(kw))
	}
	for _, verb := range []string{"CREATE", "ALTER", "DROP"} {
		if statements[strings.ToLower(verb)] == nil {
			t.Fatalf("no parser for %s", verb)
		}
		for k := Rule; k <= User; k++ {
			forms = append(forms, verb+" "+k.String())
		}
	}
	for form, example := range map[string]string{
		"ALTER ROUTE":                      "ALTER ROUTE r WITH (delay='1ms')",
		"ALTER ROUTE name RESET":           "ALTER ROUTE r RESET (delay)",
		"SHOW ALL":                         "SHOW ALL",
		"RESET ALL":                        "RESET ALL",
		"SHOW CLUSTER":                     "SHOW CLUSTER sessions",
		"SHOW WHATIF RTT":                  "SHOW WHATIF RTT '1ms'",
		"CANCEL STATEMENT":                 "CANCEL STATEMENT 1",
		"TERMINATE SESSION":                "TERMINATE SESSION 1",
		"CANCEL STATEMENT id ON INSTANCE":  "CANCEL STATEMENT 1 ON INSTANCE 'b'",
		"TERMINATE SESSION id ON INSTANCE": "TERMINATE SESSION 1 ON INSTANCE 'b'",
		"SELECT pg_cancel_backend":         "SELECT pg_cancel_backend(1)",
		"SELECT pg_terminate_backend":      "SELECT pg_terminate_backend(1)",
	} {
		if _, err := Parse(example); err != nil {
			t.Errorf("%s: the example %q does not parse: %v", form, example, err)
		}
		forms = append(forms, form)
	}
	slices.Sort(forms)
	return forms
}

// TestEveryStatementDocumented fails when a statement the console's
// parser accepts is missing from doc/console.md, where each is written
// as code beginning with its form (`CREATE EXCEPT RULE name ...`).
func TestEveryStatementDocumented(t *testing.T) {
	testenv.CheckDocumented(t, consoleDoc, testenv.ReadDoc(t, consoleDoc), statementForms(t), "",
		"console statements (write each as `FORM ...` in its Statements table)")
}
