package link

import (
	"fmt"
	"strings"
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

// String returns "high", "normal" or "low", or "class(N)" for an invalid
// class.
func (c Class) String() string {
	switch c {
	case High:
		return "high"
	case Normal:
		return "normal"
	case Low:
		return "low"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ParseClass parses "high", "normal" or "low", ignoring case and
// surrounding spaces.
func ParseClass(s string) (Class, error) {
	t := strings.TrimSpace(s)
	for _, c := range byPriority {
		if strings.EqualFold(t, c.String()) {
			return c, nil
		}
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

// String returns "up" or "down".
func (d Direction) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}
