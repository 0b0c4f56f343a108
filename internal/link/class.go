package link

import (
	"fmt"

	"github.com/sluicelab/sluice/internal/enum"
)

// Class is the network priority of a Send. Classes are served in strict
// priority: High, then Normal, then Low. The zero Class is Normal.
type Class uint8

// The classes.
const (
	Normal Class = iota
	High
	Low

	// NumClasses is the number of classes; valid classes are below it.
	NumClasses = 3
)

// byPriority lists the classes from the highest to the lowest.
var byPriority = [NumClasses]Class{High, Normal, Low}

var classNames = []string{High: "high", Normal: "normal", Low: "low"}

// String returns "high", "normal" or "low", or "class(N)" for an invalid
// class.
func (c Class) String() string { return enum.Name(classNames, int(c), "class") }

// ParseClass parses "high", "normal" or "low", ignoring case and
// surrounding spaces.
func ParseClass(s string) (Class, error) {
	if i, ok := enum.Index(classNames, s, true); ok {
		return Class(i), nil
	}
	return Normal, fmt.Errorf("link: %w %q (want high, normal or low)", ErrInvalidClass, s)
}

// Direction is one of a link's two independent directions.
type Direction uint8

// The directions.
const (
	Up   Direction = iota // client to server
	Down                  // server to client
)

var directionNames = []string{Up: "up", Down: "down"}

// String returns "up" or "down", or "direction(N)" for an invalid
// direction.
func (d Direction) String() string { return enum.Name(directionNames, int(d), "direction") }
