package kubernetes

import "context"

// OpenEnv opens the backend with env as its whole environment, so that
// parallel tests each open their own namespace.
func OpenEnv(ctx context.Context, env map[string]string) (*Driver, error) {
	return open(ctx, func(k string) string { return env[k] })
}
