// Package guarded_test is a user's package whose whole binary is guarded,
// as the README says: sandboxtest.Main with GuardAll in its TestMain, and
// tests that make things with plain testcontainers-go and the Docker
// client, naming no part of rightsize.
package guarded_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rightsize/rightsize-go/sandboxtest"
	"github.com/testcontainers/testcontainers-go"

	"example.com/usermodule/userkit"
)

func TestMain(m *testing.M) {
	sandboxtest.Main(m, sandboxtest.GuardAll())
}

// TestBuildsAndVolumes builds an image FROM $USER_IMAGE with
// testcontainers-go (FromDockerfile, kept), makes a container of it (not
// started) and creates a named volume through the Docker client; it
// writes what it made to the info file (userkit.Info: container=, image=, volume=, then
// blocked=1) and blocks until it is killed. All three carry the label
// dev.rightsize.test.guardall=$USER_TAG, and the volume is named
// userdata-$USER_TAG: the harness finds them by it, and cleans up after a
// failure.
func TestBuildsAndVolumes(t *testing.T) {
	img, tag := os.Getenv(userkit.EnvImage), os.Getenv("USER_TAG")
	if img == "" || tag == "" {
		t.Skip(userkit.EnvImage + " and USER_TAG are not set: this test is run by the repository's harness")
	}
	ctx := context.Background()
	say := userkit.Info(t)
	labels := map[string]string{"dev.rightsize.test.guardall": tag}
	dir := t.TempDir()
	dockerfile := "FROM " + img + "\nLABEL dev.rightsize.test.guardall=" + tag + "\nRUN echo built > /built\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			FromDockerfile: testcontainers.FromDockerfile{Context: dir, KeepImage: true},
			Cmd:            []string{"/server", "8080"},
			Labels:         labels,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.ContainerInspect(ctx, c.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	say("container", c.GetContainerID())
	say("image", res.Container.Image)
	v, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: "userdata-" + tag, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	say("volume", v.Volume.Name)
	say("blocked", "1")
	for {
		time.Sleep(time.Minute) // until SIGKILL, a signal or the -timeout alarm
	}
}
