package kubernetes

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// forward is one pod port forwarded to 127.0.0.1 of this process, through
// the API server's pods/portforward, for as long as this process or the
// sandbox lives.
//
// It is not client-go's PortForwarder: that one ends the whole forward
// when one connection fails ("connection refused" while the pod's server
// is not listening yet), so a caller that dials until the server answers
// would dial a dead port. Here the local port stays for the sandbox's
// life: a failed connection closes the stream connection to the API server
// it went through (after an error the server serves it no more), and the
// next connection makes a new one.
type forward struct {
	port   int // the pod's
	ln     net.Listener
	dialer httpstream.Dialer

	mu    sync.Mutex
	conn  httpstream.Connection // nil until the first connection, or lost
	reqID int
}

// forwardPort returns the local port that port of the pod is forwarded
// to, making the forward at its first use.
func (s *Sandbox) forwardPort(port int) (int, error) {
	s.fwMu.Lock()
	defer s.fwMu.Unlock()
	if f := s.forwards[port]; f != nil {
		return f.ln.Addr().(*net.TCPAddr).Port, nil
	}
	if s.fwStopped {
		return 0, fmt.Errorf("kubernetes: port %d of pod %s/%s: the sandbox was stopped", port, s.d.ns, s.name)
	}
	url := s.d.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.d.ns).Name(s.name).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(s.d.stream)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: port-forward to pod %s/%s: %w", s.d.ns, s.name, err)
	}
	ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(url, s.d.stream)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: port-forward to pod %s/%s: %w", s.d.ns, s.name, err)
	}
	sp := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: rt}, http.MethodPost, url)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("kubernetes: port-forward to pod %s/%s: %w", s.d.ns, s.name, err)
	}
	f := &forward{port: port, ln: ln, dialer: portforward.NewFallbackDialerForStreaming(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})}
	if s.forwards == nil {
		s.forwards = map[int]*forward{}
	}
	s.forwards[port] = f
	go f.serve()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// stopForwards ends the sandbox's forwards; none is made after.
func (s *Sandbox) stopForwards() {
	s.fwMu.Lock()
	defer s.fwMu.Unlock()
	for _, f := range s.forwards {
		f.ln.Close()
	}
	s.forwards, s.fwStopped = nil, true
}

// serve forwards each connection to the listener until it is closed.
func (f *forward) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			if f.conn != nil {
				f.conn.Close()
			}
			f.mu.Unlock()
			return
		}
		go f.handle(c)
	}
}

// stream returns the connection to the API server, made (again) when
// there is none or it was lost, and a new request id.
func (f *forward) stream() (httpstream.Connection, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		select {
		case <-f.conn.CloseChan():
			f.conn = nil
		default:
		}
	}
	if f.conn == nil {
		conn, _, err := f.dialer.Dial(portforward.PortForwardProtocolV1Name)
		if err != nil {
			return nil, 0, err
		}
		f.conn = conn
	}
	f.reqID++
	return f.conn, f.reqID, nil
}

// handle carries one local connection to the pod's port and back, over an
// error and a data stream of their own. The pod refusing it closes it
// alone.
func (f *forward) handle(c net.Conn) {
	defer c.Close()
	conn, id, err := f.stream()
	if err != nil {
		return
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(f.port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return
	}
	// Nothing is written on it; what the node says comes back on it.
	errStream.Close()
	defer conn.RemoveStreams(errStream)
	said := make(chan []byte, 1)
	go func() {
		msg, _ := io.ReadAll(errStream)
		said <- msg
	}()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return
	}
	defer conn.RemoveStreams(data)
	remoteDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, data)
		close(remoteDone)
	}()
	localErr := make(chan struct{})
	go func() {
		if _, err := io.Copy(data, c); err != nil && !errors.Is(err, net.ErrClosed) {
			close(localErr)
			return
		}
		// The local side is done writing: the pod's reply may still come.
		data.Close()
	}()
	select {
	case <-remoteDone:
	case <-localErr:
	}
	// Unsent data would block the error stream's end.
	_ = data.Reset()
	if msg := <-said; len(msg) > 0 {
		conn.Close()
	}
}
