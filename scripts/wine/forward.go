//go:build ignore

// forward.go: the Windows gate's way to this machine's Docker engine. A
// Windows test binary under Wine reaches an engine over TCP only, and
// dockerd here listens on its unix socket alone; restarting it with a TCP
// listener would touch the engine everyone shares. So this listens on
// 127.0.0.1 (port chosen by the system), prints "tcp://127.0.0.1:PORT" and
// copies each connection to and from the socket, byte for byte (the API's
// hijacked streams included), until its stdin closes: it ends with the
// gate that started it, however that ends.
//
//	go run scripts/wine/forward.go /var/run/docker.sock
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run forward.go SOCKET")
		os.Exit(2)
	}
	sock := os.Args[1]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
	fmt.Printf("tcp://%s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "forward:", err)
			os.Exit(1)
		}
		go pipe(c, sock)
	}
}

func pipe(c net.Conn, sock string) {
	defer c.Close()
	u, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	for _, p := range [][2]net.Conn{{u, c}, {c, u}} {
		go func() {
			_, _ = io.Copy(p[0], p[1])
			// Half-close, so that the other side sees the end of a
			// hijacked stream's input.
			if cw, ok := p[0].(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
}
