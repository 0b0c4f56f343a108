package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// maxPairs bounds the sessions relayed at once (two sockets each).
const maxPairs = 32768

// relay owns the BPF objects. Its methods are safe for concurrent use (the
// kernel serialises map updates).
type relay struct {
	socks *ebpf.Map     // socket cookie -> socket
	peers *ebpf.Map     // socket cookie -> its peer's cookie
	prog  *ebpf.Program // the stream verdict, attached to socks

	copied atomic.Int64 // bytes that went through user space, all sessions
}

// newRelay loads the program and attaches it to a new sockhash.
func newRelay() (*relay, error) {
	socks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.SockHash, KeySize: 8, ValueSize: 8, MaxEntries: 2 * maxPairs})
	if err != nil {
		return nil, fmt.Errorf("create sockhash (root and CONFIG_BPF_STREAM_PARSER needed): %w", err)
	}
	peers, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 2 * maxPairs})
	if err != nil {
		socks.Close()
		return nil, fmt.Errorf("create peer map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SkSKB,
		AttachType:   ebpf.AttachSkSKBVerdict,
		Instructions: verdict(socks, peers),
		License:      "GPL",
	})
	if err == nil {
		err = link.RawAttachProgram(link.RawAttachProgramOptions{Target: socks.FD(), Program: prog, Attach: ebpf.AttachSkSKBVerdict})
		if err != nil {
			prog.Close()
		}
	}
	if err != nil {
		socks.Close()
		peers.Close()
		return nil, fmt.Errorf("load stream verdict: %w", err)
	}
	return &relay{socks: socks, peers: peers, prog: prog}, nil
}

// verdict is the program, in C:
//
//	u64 me = bpf_get_socket_cookie(skb);
//	u64 *peer = bpf_map_lookup_elem(&peers, &me);
//	if (!peer) return SK_PASS;
//	return bpf_sk_redirect_hash(skb, &socks, peer, 0); // 0: the peer's egress
func verdict(socks, peers *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.RFP, -8, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, peers.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.Mov.Reg(asm.R3, asm.R0),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.LoadMapPtr(asm.R2, socks.FD()),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnSkRedirectHash.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("pass"), // SK_PASS
		asm.Return(),
	}
}

func (r *relay) Close() error {
	return errors.Join(r.prog.Close(), r.socks.Close(), r.peers.Close())
}

// splice relays a and b until both directions end, then closes them. The
// kernel carries the bytes once both sockets are registered; the copies
// here carry what arrived before, and end of stream.
func (r *relay) splice(a, b *net.TCPConn) error {
	defer a.Close()
	defer b.Close()
	conns := [2]*net.TCPConn{a, b}
	var keys [2]uint64
	for i, c := range conns {
		k, err := cookie(c)
		if err != nil {
			return err
		}
		// The sockhash drops a socket by itself when it closes.
		if err := r.register(c, k); err != nil {
			return err
		}
		keys[i] = k
	}
	// Peers only once both sockets are in the sockhash: a redirect to a
	// socket not yet there would drop the segment, while a socket without
	// a peer passes its bytes to the copies below.
	for i, k := range keys {
		if err := r.peers.Put(k, keys[1-i]); err != nil {
			return fmt.Errorf("peer map: %w", err)
		}
		defer r.peers.Delete(k)
	}
	done := make(chan struct{})
	go func() {
		r.copied.Add(pipe(b, a))
		close(done)
	}()
	r.copied.Add(pipe(a, b))
	<-done
	return nil
}

// pipe copies src to dst through user space (only what the kernel did not
// redirect), then half-closes dst once every byte src received is queued
// on dst, so the FIN cannot overtake bytes the kernel still holds. It
// returns the bytes it copied.
func pipe(dst, src *net.TCPConn) int64 {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return total
			}
			total += int64(n)
		}
		if err != nil {
			if err == io.EOF && drained(src, dst) == nil {
				dst.CloseWrite()
			}
			return total
		}
	}
}

// drained waits until dst has queued every byte src received (src has seen
// end of stream, so that count is final): the redirect hands segments to
// dst through a kernel work queue, behind which a FIN must not go. It
// gives up after 10 s.
func drained(src, dst *net.TCPConn) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := tcpInfo(src)
		if err != nil {
			return err
		}
		out, err := tcpInfo(dst)
		if err != nil {
			return err
		}
		var outq int // written, not yet acknowledged
		if err := withFD(dst, func(fd int) (err error) {
			outq, err = unix.IoctlGetInt(fd, unix.SIOCOUTQ)
			return err
		}); err != nil {
			return fmt.Errorf("SIOCOUTQ: %w", err)
		}
		// The FIN src received takes one sequence number of its own.
		want := in.Bytes_received - 1
		queued := out.Bytes_acked + uint64(outq)
		if queued >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d bytes queued after 10 s", queued, want)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func tcpInfo(c *net.TCPConn) (*unix.TCPInfo, error) {
	var info *unix.TCPInfo
	err := withFD(c, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("TCP_INFO: %w", err)
	}
	return info, nil
}

// register puts c, whose cookie is k, into the sockhash.
func (r *relay) register(c *net.TCPConn, k uint64) error {
	return withFD(c, func(fd int) error {
		if err := r.socks.Put(k, uint64(fd)); err != nil {
			return fmt.Errorf("sockhash: %w", err)
		}
		return nil
	})
}

func cookie(c *net.TCPConn) (uint64, error) {
	var k uint64
	err := withFD(c, func(fd int) error {
		v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
		k = v
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("socket cookie: %w", err)
	}
	return k, nil
}

func withFD(c syscall.Conn, f func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
