package kubernetes

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// OpenEnv opens the backend with env as its whole environment, so that
// parallel tests each open their own namespace.
func OpenEnv(ctx context.Context, env map[string]string) (*Driver, error) {
	return open(ctx, func(k string) string { return env[k] })
}

// PodFor is the pod Start would create for spec, without its owner.
func (d *Driver) PodFor(name string, spec backend.Spec) (*corev1.Pod, error) {
	return d.podFor(name, spec)
}

// LoadEnv is OpenEnv without asking the cluster anything.
func LoadEnv(env map[string]string) (*Driver, error) {
	return load(func(k string) string { return env[k] })
}

// SetWarn makes warn what d says of what no call returned (a Lease lost).
func (d *Driver) SetWarn(warn func(msg string)) { d.warn = warn }

// SetExecStart bounds how long d's Execs wait for their command to start.
func (d *Driver) SetExecStart(bound time.Duration) { d.execStart = bound }

// SetAfterCreate makes f run between a Start's creates and its check of
// their owner.
func (d *Driver) SetAfterCreate(f func(name string)) { d.afterCreate = f }
