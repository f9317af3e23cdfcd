package sandboxtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/testimage"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

func init() {
	helperRoles["empty-cache-dir"] = helperEmptyCacheDir
}

// helperEmptyCacheDir sets up the session and says where its ledger is.
func helperEmptyCacheDir(t *testing.T) {
	in, err := sandboxtest.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ledger.TellEmptyCacheDir(os.Stderr) // a second caller in the process says nothing more
	proctest.Say("cachedir", in.CacheDir)
	proctest.Block()
}

// TestEmptyCacheDirSaysSo: rightsize-go reads RIGHTSIZE_CACHE_DIR="" as
// unset (go test runs each package in its own folder, so "" as the
// current directory would split the ledger per package), where the other
// members read it as the current directory (cache-dir.ts,
// CacheDir.kt, cache_dir.rs). A process says so once, on stderr.
func TestEmptyCacheDirSaysSo(t *testing.T) {
	testimage.Busybox(t) // an engine test: the session resolves the backend
	home := t.TempDir()
	h := startHelper(t, "empty-cache-dir", "", "HOME="+home, "RIGHTSIZE_REAPER=sweep")
	got := h.Expect("cachedir")
	h.Finish()
	if want := filepath.Join(home, ".cache", "rightsize"); got != want {
		t.Errorf("with %s empty the ledger is in %s, want the default %s", ledger.EnvCacheDir, got, want)
	}
	const note = ledger.EnvCacheDir + " is set but empty"
	if n := strings.Count(h.Stderr(), note); n != 1 {
		t.Errorf("the process said %q %d times on stderr, want once:\n%s", note, n, h.Stderr())
	}
	if !strings.Contains(h.Stderr(), "current directory") {
		t.Errorf("the note does not say what the other members do:\n%s", h.Stderr())
	}
}
