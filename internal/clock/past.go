package clock

// This file holds the socket deadline that interrupts I/O.

import "time"

// LongAgo is a socket deadline in the past, the one idiom for making a
// socket's pending and future I/O return at once (with os.ErrDeadlineExceeded):
// conn.SetDeadline(LongAgo) from a context.AfterFunc or a closer. It is a
// wall-clock time like SocketDeadline's, and clearing the deadline
// (time.Time{}) makes the socket usable again. Safe to share: a time.Time
// is a value.
var LongAgo = time.Unix(1, 0)
