package apiproxy

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/testimage"
)

// The proxy's cost per call: each iteration makes one call straight to the
// engine and one through the proxy (in alternating order, over kept-alive
// connections), and the benchmark reports the median (and 90th
// percentile) of each and their difference, in microseconds: "added-p50-µs"
// is the number to watch. ns/op covers both calls and says little.
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/apiproxy

func BenchmarkAddedLatency(b *testing.B) {
	testimage.Engine(b)
	direct, err := client.New(client.FromEnv)
	if err != nil {
		b.Fatal(err)
	}
	host := direct.DaemonHost()
	direct.Close()
	if !strings.HasPrefix(host, "unix://") {
		b.Skipf("the engine is at %s: this compares unix sockets", host)
	}
	p := startProxy(b, host, &recHook{})
	for _, path := range []string{"/_ping", "/v1.41/containers/json"} {
		b.Run(strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_"), func(b *testing.B) {
			compare(b, host, p.Addr(), path)
		})
	}
}

// BenchmarkProxyOverhead is the same against a fake engine in this
// process (a net/http server answering "OK"), without the engine's own
// time and noise.
func BenchmarkProxyOverhead(b *testing.B) {
	e := httpEngine(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		io.WriteString(w, "OK")
	})
	p := startProxy(b, e.addr(), &recHook{})
	compare(b, e.addr(), p.Addr(), "/_ping")
}

func compare(b *testing.B, directAddr, proxyAddr, path string) {
	dc, pc := unixClient(directAddr), unixClient(proxyAddr)
	defer dc.CloseIdleConnections()
	defer pc.CloseIdleConnections()
	get := func(c *http.Client) time.Duration {
		start := time.Now()
		resp, err := c.Get("http://docker" + path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d, %v", path, resp.StatusCode, err)
		}
		return time.Since(start)
	}
	for range 20 { // connections up, caches warm
		get(dc)
		get(pc)
	}
	var ds, ps []time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			ds = append(ds, get(dc))
			ps = append(ps, get(pc))
		} else {
			ps = append(ps, get(pc))
			ds = append(ds, get(dc))
		}
		i++
	}
	dp50, pp50 := quantile(ds, 0.5), quantile(ps, 0.5)
	dp90, pp90 := quantile(ds, 0.9), quantile(ps, 0.9)
	b.ReportMetric(us(dp50), "direct-p50-µs")
	b.ReportMetric(us(pp50), "proxy-p50-µs")
	b.ReportMetric(us(pp50-dp50), "added-p50-µs")
	b.ReportMetric(us(pp90-dp90), "added-p90-µs")
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
