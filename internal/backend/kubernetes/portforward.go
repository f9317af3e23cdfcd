package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// forward is one pod port forwarded to 127.0.0.1 of this process, through
// the API server, for as long as this process or the sandbox lives.
type forward struct {
	local int
	stop  chan struct{}
	done  chan struct{} // closed once the forwarder has ended
}

// forwardPort returns the local port that port of the pod is forwarded
// to, making the forward at its first use, and again once a forward has
// ended (its connection to the API server lost).
func (s *Sandbox) forwardPort(ctx context.Context, port int) (int, error) {
	s.fwMu.Lock()
	defer s.fwMu.Unlock()
	if f := s.forwards[port]; f != nil {
		select {
		case <-f.done:
			delete(s.forwards, port)
		default:
			return f.local, nil
		}
	}
	if s.fwStopped {
		return 0, fmt.Errorf("kubernetes: port %d of pod %s/%s: the sandbox was stopped", port, s.d.ns, s.name)
	}
	url := s.d.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.d.ns).Name(s.name).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(s.d.stream)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: port-forward to pod %s/%s: %w", s.d.ns, s.name, err)
	}
	ws, err := portforward.NewSPDYOverWebsocketDialer(url, s.d.stream)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: port-forward to pod %s/%s: %w", s.d.ns, s.name, err)
	}
	dialer := portforward.NewFallbackDialer(ws, spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, url), func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	f := &forward{stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, f.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: port-forward to pod %s/%s: %w", s.d.ns, s.name, err)
	}
	ended := make(chan error, 1)
	go func() {
		ended <- fw.ForwardPorts()
		close(f.done)
	}()
	select {
	case <-ready:
	case err := <-ended:
		return 0, fmt.Errorf("kubernetes: port-forward to port %d of pod %s/%s: %w", port, s.d.ns, s.name, s.d.apiError("port-forward", err))
	case <-ctx.Done():
		close(f.stop)
		return 0, fmt.Errorf("kubernetes: port-forward to port %d of pod %s/%s: %w", port, s.d.ns, s.name, context.Cause(ctx))
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		close(f.stop)
		return 0, fmt.Errorf("kubernetes: port-forward to port %d of pod %s/%s: no local port (%v)", port, s.d.ns, s.name, err)
	}
	f.local = int(ports[0].Local)
	if s.forwards == nil {
		s.forwards = map[int]*forward{}
	}
	s.forwards[port] = f
	return f.local, nil
}

// stopForwards ends the sandbox's forwards; none is made after.
func (s *Sandbox) stopForwards() {
	s.fwMu.Lock()
	defer s.fwMu.Unlock()
	for _, f := range s.forwards {
		close(f.stop)
	}
	s.forwards, s.fwStopped = nil, true
}
