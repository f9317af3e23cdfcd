package sandboxtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"

	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// serverSuite is a testify suite whose SetupSuite starts a sandbox that
// every test method of the suite reaches.
type serverSuite struct {
	suite.Suite
	img    string
	srv    *sandboxtest.Guard
	net    *sandboxtest.Network
	cache  string
	run    string
	listed []string
}

func (s *serverSuite) SetupSuite() {
	s.net = sandboxtest.NewNetwork(s.T())
	spec := serverSpec(s.img)
	spec.Networks = []*sandboxtest.Network{s.net}
	s.srv = sandboxtest.Start(s.T(), spec)
	in, err := sandboxtest.Session(s.T().Context())
	require.NoError(s.T(), err)
	s.cache, s.run = in.CacheDir, in.RunID
}

func (s *serverSuite) TestReachable() {
	require.Equal(s.T(), serverBody, httpGet(s.T(), s.srv.Endpoint(serverPort)))
}

func (s *serverSuite) TestListedWhileTheSuiteRuns() {
	// The suite's sandbox and network are in the run's ledger like any
	// other: a crash now leaves them to the watchdog and the sweep.
	l := (&rig{t: s.T(), cli: rigCli}).lines(s.cache, s.run)
	require.Contains(s.T(), l.sandboxes, s.srv.Name())
	require.Contains(s.T(), l.networks, s.net.Name())
	s.listed = append(l.sandboxes, l.networks...)
}

// TestTestifySuite: a sandbox started in SetupSuite lives for the whole
// suite, is listed in the ledger while it runs, and is gone, with its
// network, when suite.Run returns.
func TestTestifySuite(t *testing.T) {
	img := testimage.Busybox(t)
	r := newRig(t)
	s := &serverSuite{img: img}
	// SetupSuite's s.T() is the t suite.Run is given: run in a subtest of
	// its own, its cleanups have run when t.Run returns.
	ok := t.Run("suite", func(t *testing.T) { suite.Run(t, s) })
	require.True(t, ok, "the suite failed")
	require.NotNil(t, s.srv, "SetupSuite did not run")
	require.NotEmpty(t, s.listed, "the ledger was not read while the suite ran")
	_, exists := r.inspect(s.srv.Name())
	require.False(t, exists, "the suite's sandbox %s is still on the engine after the suite", s.srv.Name())
	netExists, _, _ := r.networkExists(s.net.Name())
	require.False(t, netExists, "the suite's network %s is still on the engine after the suite", s.net.Name())
}
