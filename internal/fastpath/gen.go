package fastpath

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go@v0.22.0 -target bpfel -cc clang -cflags "-O2 -g -Wall -I/usr/include/x86_64-linux-gnu" relay bpf/relay.c
