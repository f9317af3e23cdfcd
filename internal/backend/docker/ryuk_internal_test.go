package docker

import (
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
)

// A keep-alive container must not carry what Ryuk removes by: whatever
// modifier the request had keeps working, and Ryuk's labels, which
// testcontainers-go puts on before the modifiers run, are taken off.
func TestKeepFromRyuk(t *testing.T) {
	called := false
	req := testcontainers.GenericContainerRequest{ContainerRequest: testcontainers.ContainerRequest{
		ConfigModifier: func(*container.Config) { called = true },
	}}
	keepFromRyuk(&req)
	cfg := &container.Config{Labels: map[string]string{
		tcLabelReap: "true", tcLabelSession: "abc", "org.testcontainers": "true", LabelReuse: "799aad5a3338",
	}}
	req.ConfigModifier(cfg)
	if !called {
		t.Error("the request's own config modifier was lost")
	}
	for _, k := range []string{tcLabelReap, tcLabelSession} {
		if _, ok := cfg.Labels[k]; ok {
			t.Errorf("label %s is still there", k)
		}
	}
	if cfg.Labels[LabelReuse] != "799aad5a3338" {
		t.Errorf("labels %v: the keep-alive label went too", cfg.Labels)
	}
}
