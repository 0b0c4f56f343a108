// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The kernel half of sluice's fast path: a stream verdict program on a
// sockhash. For each chunk a paired socket receives, it walks the chunk's
// protocol messages (PostgreSQL's after the startup packet, MySQL's
// packets), counts them in the socket's flow, and hands the chunk to the
// peer's send queue, or to user space while the session is paused.
//
// Build: go generate ./internal/fastpath (bpf2go, clang); the objects are
// committed, so go build needs no clang.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define PROTO_PG 1
#define PROTO_MYSQL 2

#define MAX_SOCKS 65536

// A chunk of at most JOURNAL_MAX bytes is redirected with a copy in the
// journal; a larger one goes to user space, which reads it from the
// socket as on any path.
#define JOURNAL_MAX 4096
#define JOURNAL_SIZE (8 << 20)

// struct record is the journal's header for one redirected chunk; the
// chunk's bytes follow it.
struct record {
	__u64 cookie; // the receiving socket
	__u64 ns;     // bpf_ktime_get_ns when the chunk was received
	__u32 len;    // bytes of the chunk that follow
	__u32 pad;
};

struct scratch {
	struct record r;
	__u8 data[JOURNAL_MAX];
};

// struct link is one socket's place in a session; user space writes it.
struct link {
	__u64 peer;     // the peer socket's cookie
	__u64 consumed; // bytes user space has read from the socket and sent on
	__u32 redirect; // 1: chunks go to the peer once consumed == passed
	__u8 proto;     // PROTO_PG or PROTO_MYSQL
	__u8 client;    // 1: the socket faces the client
	__u8 pad[2];
};

// struct flow is one socket's framing state and counts. User space
// creates it zeroed before the link and reads it; only this program,
// which the kernel runs for one socket at a time, writes it.
struct flow {
	__u64 remain;      // body bytes of the current message still to come
	__u64 bytes;       // bytes received
	__u64 redirected;  // bytes handed to the peer in the kernel
	__u64 passed;      // bytes handed to user space
	__u64 dropped;     // bytes the redirect refused (the peer is gone)
	__u64 msgs;        // messages begun
	__u64 first_ns;    // bpf_ktime_get_ns of the first chunk, 0 before
	__u64 last_ns;     // of the last chunk
	__u64 msg_ns;      // when the last message began
	__u32 have;        // header bytes gathered in hdr
	__u8 hdr[8];       // the current message's header, as far as gathered
	__u8 broken;       // 1: a length made no sense; counting stopped
	__u8 cont;         // MySQL: the next packet continues a 16 MiB one
	__u8 status;       // PostgreSQL: the last ReadyForQuery status byte
	__u8 want_status;  // PostgreSQL: the next body byte is that status
	__u32 types[256];  // messages begun, by type byte (see doc.go)
};

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, MAX_SOCKS);
	__type(key, __u64);
	__type(value, __u64);
} socks SEC(".maps");

// links is user space's to write; an update replaces the element, which
// the kernel frees only after every program that may still read the old
// one has returned (BPF_F_NO_PREALLOC). A preallocated map would hand the
// old element to the next update at once: a program reading its link
// while user space wrote both links of a pair (Hold, Resume) could see the
// peer's link in place of its own, and redirect a chunk back out of the
// socket it came in on.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SOCKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct link);
} links SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SOCKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct flow);
} flows SEC(".maps");

// journal holds a copy of every redirected chunk, in the order the
// program ran, for user space's observers.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, JOURNAL_SIZE);
} journal SEC(".maps");

// buf is where a record is assembled before it is copied to the journal.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} buf SEC(".maps");

struct walk {
	struct __sk_buff *skb;
	struct flow *f;
	__u64 now;
	__u32 off;
	__u32 len;
	__u8 proto;
	__u8 client;
};

// begin counts the message whose header f->hdr now holds whole, and sets
// the body to skip. It returns 1 when the framing is lost.
static __always_inline int begin(struct walk *w, struct flow *f)
{
	__u8 type;
	__u64 n;

	if (w->proto == PROTO_PG) {
		n = ((__u64)f->hdr[1] << 24) | ((__u64)f->hdr[2] << 16) |
		    ((__u64)f->hdr[3] << 8) | (__u64)f->hdr[4];
		if (n < 4)
			return 1;
		type = f->hdr[0];
		f->remain = n - 4;
		if (type == 'Z' && !w->client && f->remain > 0)
			f->want_status = 1;
	} else {
		n = (__u64)f->hdr[0] | ((__u64)f->hdr[1] << 8) |
		    ((__u64)f->hdr[2] << 16);
		if (f->cont) {
			// A continuation has no type byte of its own.
			f->cont = n == 0xffffff;
			f->remain = n;
			f->have = 0;
			return 0;
		}
		f->cont = n == 0xffffff;
		if (n == 0) {
			f->remain = 0;
			f->have = 0;
			f->msgs++;
			f->msg_ns = w->now;
			return 0;
		}
		type = f->hdr[4];
		f->remain = n - 1;
		// A client's packet other than a command's first counts as data.
		if (w->client && f->hdr[3] != 0) {
			f->have = 0;
			f->msgs++;
			return 0;
		}
	}
	f->have = 0;
	f->msgs++;
	f->msg_ns = w->now;
	f->types[type]++;
	return 0;
}

// need returns how many header bytes the current message has.
static __always_inline __u32 need(struct walk *w, struct flow *f)
{
	if (w->proto == PROTO_PG)
		return 5;
	if (f->have < 4 || f->cont)
		return 4;
	if ((f->hdr[0] | f->hdr[1] | f->hdr[2]) == 0)
		return 4;
	return 5;
}

// step consumes one header byte or one run of body bytes of the chunk.
static long step(__u32 i, void *data)
{
	struct walk *w = data;
	struct flow *f = w->f;
	__u8 b;

	if (w->off >= w->len)
		return 1;
	if (f->remain > 0) {
		if (f->want_status) {
			if (bpf_skb_load_bytes(w->skb, w->off, &b, 1))
				goto lost;
			f->status = b;
			f->want_status = 0;
		}
		__u64 left = w->len - w->off;
		__u64 skip = f->remain < left ? f->remain : left;
		f->remain -= skip;
		w->off += skip;
		return 0;
	}
	if (bpf_skb_load_bytes(w->skb, w->off, &b, 1))
		goto lost;
	f->hdr[f->have & 7] = b;
	f->have++;
	w->off++;
	if (f->have < need(w, f))
		return 0;
	if (begin(w, f))
		goto lost;
	return 0;
lost:
	f->broken = 1;
	return 1;
}

// log_chunk copies the chunk into the journal. It returns 0 when the
// chunk is too large or the journal is full.
static __always_inline int log_chunk(struct __sk_buff *skb, __u64 me, __u64 now)
{
	__u32 zero = 0;
	__u32 n = skb->len;
	if (n == 0 || n > JOURNAL_MAX)
		return 0;
	struct scratch *s = bpf_map_lookup_elem(&buf, &zero);
	if (!s)
		return 0;
	s->r.cookie = me;
	s->r.ns = now;
	s->r.len = n;
	s->r.pad = 0;
	if (bpf_skb_load_bytes(skb, 0, s->data, n))
		return 0;
	return bpf_ringbuf_output(&journal, s, sizeof(s->r) + n, 0) == 0;
}

SEC("sk_skb/verdict")
int relay(struct __sk_buff *skb)
{
	// A chunk with no bytes is an end of stream (FIN) the socket has
	// already taken note of; redirected, it would reach the peer's send
	// path after user space half-closed it and fail there with EPIPE,
	// which the kernel reports on this socket. User space passes the end
	// of stream on itself, after the bytes before it.
	if (skb->len == 0)
		return SK_DROP;
	__u64 me = bpf_get_socket_cookie(skb);
	struct link *lp = bpf_map_lookup_elem(&links, &me);
	if (!lp)
		return SK_PASS;
	// One read of the link: every decision below is made on the same
	// version of it.
	struct link l = *lp;
	struct flow *f = bpf_map_lookup_elem(&flows, &me);
	if (f) {
		__u64 now = bpf_ktime_get_ns();
		if (!f->first_ns)
			f->first_ns = now;
		f->last_ns = now;
		f->bytes += skb->len;
		if (!f->broken) {
			struct walk w = {
				.skb = skb,
				.f = f,
				.now = now,
				.len = skb->len,
				.proto = l.proto,
				.client = l.client,
			};
			__u32 nr = skb->len + 1;
			if (nr > (1 << 23))
				nr = 1 << 23;
			bpf_loop(nr, step, &w, 0);
		}
	}
	// A chunk goes to the peer only once user space has sent on every
	// byte passed to it before, so the two paths never reorder the stream;
	// never back to the socket it came from.
	if (!l.redirect || !f || f->passed != l.consumed || l.peer == me) {
		if (f)
			f->passed += skb->len;
		return SK_PASS;
	}
	// User space must see every byte: a chunk the journal cannot hold
	// goes to user space instead, which keeps the order as above.
	if (!log_chunk(skb, me, f->last_ns)) {
		f->passed += skb->len;
		return SK_PASS;
	}
	__u64 peer = l.peer;
	long v = bpf_sk_redirect_hash(skb, &socks, &peer, 0);
	if (v == SK_PASS)
		f->redirected += skb->len;
	else
		f->dropped += skb->len;
	return v;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
