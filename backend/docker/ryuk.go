package docker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// ryukImage is the image testcontainers-go v0.45 starts its reaper, Ryuk,
// from (with TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX in front, when set).
const ryukImage = "testcontainers/ryuk:0.14.0"

// envRyukDisabled is testcontainers-go's switch for Ryuk; only "true"
// turns it off.
const envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"

// prepareRyuk makes sure that rightsize works whether Ryuk can start or
// not, without a setting from the user. It runs before testcontainers-go
// reads its configuration (which it does once per process). When neither
// TESTCONTAINERS_RYUK_DISABLED nor ~/.testcontainers.properties says
// anything of Ryuk, and its image is not on the engine and cannot be
// pulled (air-gapped CI, a registry that refuses), every testcontainers-go
// create would wait a minute for Ryuk and fail: Ryuk is turned off for
// this process instead, and the note says so. Guarded sandboxes do not
// need it: the watchdog and the sweep remove them. Where Ryuk can start,
// nothing changes; it may remove a guarded container before rightsize does,
// and whoever comes second finds it gone.
//
// pulled says whether a pull was tried: the engine answered, and what
// waits on it next is given time afresh (backend.ResolveTimeout does not
// count the pull).
func prepareRyuk(ctx context.Context) (note string, pulled bool) {
	if v, ok := os.LookupEnv(envRyukDisabled); ok && v != "" {
		if _, err := strconv.ParseBool(v); err == nil {
			return "", false // the user's choice, either way
		}
	}
	if ryukInProperties() {
		return "", false
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return "", false
	}
	defer cli.Close()
	ref := os.Getenv("TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX") + ryukImage
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = cli.ImageInspect(ictx, ref)
	cancel()
	if err == nil || !notFound.says(err) {
		return "", false // there, or the engine cannot say: let testcontainers-go decide
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	pull, err := cli.ImagePull(pctx, ref, client.ImagePullOptions{})
	if err == nil {
		_, err = io.Copy(io.Discard, pull)
		pull.Close()
		if err == nil {
			if _, ierr := cli.ImageInspect(pctx, ref); ierr == nil {
				return "", true
			} else {
				err = ierr
			}
		}
	}
	os.Setenv(envRyukDisabled, "true")
	if !testcontainers.ReadConfig().RyukDisabled {
		return fmt.Sprintf("testcontainers-go's Ryuk cannot start here (its image %s is not on the engine and could not be pulled: %v), and testcontainers-go read its configuration before rightsize could turn Ryuk off: set %s=true", ref, oneLine(err), envRyukDisabled), true
	}
	return fmt.Sprintf("testcontainers-go's Ryuk cannot start here (its image %s is not on the engine and could not be pulled: %v): turned off for this process (%s=true); rightsize removes its own sandboxes without it", ref, oneLine(err), envRyukDisabled), true
}

// ryukInProperties reports whether ~/.testcontainers.properties says
// anything of ryuk.disabled: then it is the user's choice.
func ryukInProperties() bool {
	_, ok := property("ryuk.disabled")
	return ok
}

// property is the value of key in ~/.testcontainers.properties, and
// whether the file sets it.
func property(key string) (string, bool) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", false
	}
	f, err := os.Open(filepath.Join(home, ".testcontainers.properties"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func oneLine(err error) string {
	if err == nil {
		return "no error"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
