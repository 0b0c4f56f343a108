// Package enum names the values of the small enumerations other packages
// define (a link class, a loss model, a statement outcome): each keeps a
// table of names indexed by value, and String and the parsers look the
// value up in it here, so the fallback spelling of a value outside the
// table, "kind(N)", is the same everywhere.
//
// The functions are pure and safe for concurrent use; they never modify
// the table passed in.
package enum
