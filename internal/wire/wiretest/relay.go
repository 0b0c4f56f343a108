package wiretest

// This file holds the relay that stands in for the proxy in the protocol
// packages' tests, and a connection that counts its bytes.

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// Opener opens a client connection, as a protocol's Frontend.Open does.
type Opener func(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error)

// Relay is a minimal stand-in for the proxy: Serve opens a client's
// connection with Open (within 20 s) and then pumps bytes both ways,
// each chunk through its observer (Observe, then Write), as the proxy
// does. A *wire.Fatal with a Reply from either observer sends
// the Reply to the client and ends the connection. When either way ends,
// both sockets close; then the Conn's Close, if set, runs and the session
// closes.
//
// Set Protocol, Upstream, Reg, Open and ReadSizes, then hand Serve to a
// loopback server (testenv.Serve) and set Addr to its address; Split may
// be set until the first client connects. The methods are safe for
// concurrent use.
type Relay struct {
	Protocol string            // the sessions' protocol, as in session.Info
	Upstream string            // where the dialer given to Open connects
	Reg      *session.Registry // where the sessions register
	Open     Opener            // opens each client's connection
	// ReadSizes are the sizes of the pumps' reads, cycled, so that
	// message headers land split across chunks; nil reads up to 32 KiB.
	ReadSizes []int
	// Split cuts every read into pseudo-random pieces of 1 to 300 bytes,
	// each observed and written on its own.
	Split bool

	Addr string // where clients connect

	// ClientUp and ClientDown count the bytes read from and written to
	// the clients after Open.
	ClientUp, ClientDown atomic.Int64

	mu       sync.Mutex
	openErrs []error            // guarded by mu; Open's errors but wire.ErrHandled
	sessions []*session.Session // guarded by mu; every session registered
}

// Errors returns the errors Open returned so far, but wire.ErrHandled.
func (r *Relay) Errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.openErrs)
}

// Sessions returns every session the relay registered, oldest first.
func (r *Relay) Sessions() []*session.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sessions)
}

// Serve relays client until either side ends.
func (r *Relay) Serve(client net.Conn) {
	defer client.Close()
	register := func() *session.Session {
		s := r.Reg.Open(session.Info{Route: "test", Protocol: r.Protocol, Client: client.RemoteAddr().String(), Upstream: r.Upstream}, clock.Real{}.Now())
		r.mu.Lock()
		r.sessions = append(r.sessions, s)
		r.mu.Unlock()
		return s
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", r.Upstream)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	wc, err := r.Open(ctx, client, register, dial)
	cancel()
	if err != nil {
		if !errors.Is(err, wire.ErrHandled) {
			r.mu.Lock()
			r.openErrs = append(r.openErrs, err)
			r.mu.Unlock()
		}
		return
	}
	seed := uint64(len(r.Errors())) + 1
	p := &pumps{r: r, wc: wc}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.pump(wc.Client, wc.Upstream, wc.Up, wc.Buffered, r.splitter(seed+1), &r.ClientUp, wc.Session.AddUp)
	}()
	go func() {
		defer wg.Done()
		p.pump(wc.Upstream, wc.Client, wc.Down, nil, r.splitter(seed+2), &r.ClientDown, wc.Session.AddDown)
	}()
	wg.Wait()
	if wc.Close != nil {
		wc.Close()
	}
	wc.Session.Close(clock.Real{}.Now())
}

// splitter returns the random source of a pump that splits its reads,
// seeded with seed, or nil.
func (r *Relay) splitter(seed uint64) *rand.Rand {
	if !r.Split {
		return nil
	}
	return rand.New(rand.NewPCG(seed, 7))
}

// pumps are the two pumps of one connection.
type pumps struct {
	r    *Relay
	wc   wire.Conn
	wmu  sync.Mutex // serialises writes to the client
	once sync.Once
}

// stop closes both sockets, once.
func (p *pumps) stop() {
	p.once.Do(func() {
		p.wc.Client.Close()
		p.wc.Upstream.Close()
	})
}

// write writes b to dst, holding wmu when dst is the client.
func (p *pumps) write(dst net.Conn, b []byte) error {
	if dst == p.wc.Client {
		p.wmu.Lock()
		defer p.wmu.Unlock()
	}
	_, err := dst.Write(b)
	return err
}

// pump copies first and then what src reads to dst through o, cutting
// the reads into random pieces when rng is not nil, and adds the bytes it
// writes to count and with add; it stops both sockets when it ends.
func (p *pumps) pump(src, dst net.Conn, o wire.Observer, first []byte, rng *rand.Rand, count *atomic.Int64, add func(int)) {
	defer p.stop()
	if o == nil {
		o = wire.Nop{}
	}
	send := func(b []byte) error {
		for len(b) > 0 {
			n := len(b)
			if rng != nil {
				n = 1 + rng.IntN(min(n, 300))
			}
			if err := o.Observe(b[:n]); err != nil {
				var f *wire.Fatal
				if errors.As(err, &f) && f.Reply != nil {
					_ = p.write(p.wc.Client, f.Reply)
				}
				return err
			}
			if err := p.write(dst, b[:n]); err != nil {
				return err
			}
			count.Add(int64(n))
			add(n)
			b = b[n:]
		}
		return nil
	}
	if send(first) != nil {
		return
	}
	sizes := p.r.ReadSizes
	if sizes == nil {
		sizes = []int{32 << 10}
	}
	buf := make([]byte, slices.Max(sizes))
	for i := 0; ; i++ {
		n, err := src.Read(buf[:sizes[i%len(sizes)]])
		if n > 0 && send(buf[:n]) != nil {
			return
		}
		if err != nil {
			return
		}
	}
}

// CountingConn adds the bytes each Read returns to BytesRead and those
// each Write writes to BytesWritten. The counters may be shared and read
// concurrently; both must be set.
type CountingConn struct {
	net.Conn
	BytesRead, BytesWritten *atomic.Int64
}

// Read implements net.Conn.
func (c CountingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.BytesRead.Add(int64(n))
	return n, err
}

// Write implements net.Conn.
func (c CountingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.BytesWritten.Add(int64(n))
	return n, err
}
