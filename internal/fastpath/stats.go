package fastpath

// Stats is what the program counted on one socket of a pair: the bytes
// and messages it received, whichever path they then took.
type Stats struct {
	// Bytes received: Redirected to the peer in the kernel, Passed to
	// user space, or Dropped because the redirect refused them (the peer
	// had closed). The three add up to Bytes.
	Bytes, Redirected, Passed, Dropped uint64
	// Messages begun: PostgreSQL messages, or MySQL packets (a 16 MiB
	// packet's continuations are not counted again).
	Messages uint64
	// Types counts messages begun by type byte: PostgreSQL's message
	// type; for MySQL, the first payload byte of a client's command
	// packets (sequence 0: COM_QUERY is 0x03) and of every server packet
	// (0x00 OK, 0xfe EOF, 0xff ERR, else result data).
	Types [256]uint32
	// First, Last and LastMessage are CLOCK_MONOTONIC readings in
	// nanoseconds (bpf_ktime_get_ns): the first and the last chunk
	// received, and the start of the last message. Zero before any.
	First, Last, LastMessage uint64
	// Status is the last PostgreSQL ReadyForQuery status seen on the
	// upstream's socket ('I', 'T' or 'E'), 0 before one.
	Status byte
	// Broken reports a length no message can have: the program stopped
	// counting (the bytes still move).
	Broken bool
}

func statsOf(f *relayFlow) Stats {
	return Stats{
		Bytes:       f.Bytes,
		Redirected:  f.Redirected,
		Passed:      f.Passed,
		Dropped:     f.Dropped,
		Messages:    f.Msgs,
		Types:       f.Types,
		First:       f.FirstNs,
		Last:        f.LastNs,
		LastMessage: f.MsgNs,
		Status:      f.Status,
		Broken:      f.Broken != 0,
	}
}
