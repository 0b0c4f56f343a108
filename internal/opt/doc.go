// Package opt applies the defaults of option fields whose zero (or
// negative) value means "unset". It holds no state and needs no lock.
package opt
